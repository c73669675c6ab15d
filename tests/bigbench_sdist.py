"""A stand-in for PyPI bigbench 1.0.0's sdist, which PyPI stopped serving in December 2026: a gzip tar
in the sdist's own layout (bigbench-1.0.0/bigbench/benchmark_tasks/<task>[/<subtask>]/task.json, a
parent task.json that only lists its subtasks, programmatic tasks as task.py, tasks BBH does not use),
with made-up examples in each BBH source task's own JSON shape (task_prefix / example_input_prefix,
target_scores, or target for the free-form ones). Written here, not copied: the texts are ours, only
the field layout is BIG-bench's. COUNTS says how many examples each (sub)task holds, so tests know
what a reader must return without calling it."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

ROOT = "bigbench-1.0.0/bigbench/benchmark_tasks"
SUBTASKS = {"logical_deduction": ("three_objects", "five_objects", "seven_objects"),
            "tracking_shuffled_objects": ("three_objects", "five_objects", "seven_objects")}
OBJECTS = {"three_objects": 3, "five_objects": 5, "seven_objects": 7}
# examples per (sub)task: navigate exceeds BBH's 250 a subtask, the rest are small
COUNTS = {"causal_judgment": 9, "date_understanding": 12, "disambiguation_qa": 8, "dyck_languages": 6,
          "formal_fallacies_syllogisms_negation": 8, "geometric_shapes": 7, "hyperbaton": 8,
          "logical_deduction/three_objects": 6, "logical_deduction/five_objects": 5,
          "logical_deduction/seven_objects": 7, "movie_recommendation": 8, "navigate": 260,
          "object_counting": 5, "penguins_in_a_table": 6, "reasoning_about_colored_objects": 8, "ruin_names": 8,
          "salient_translation_error_detection": 12, "snarks": 8, "sports_understanding": 6,
          "temporal_sequences": 12, "tracking_shuffled_objects/three_objects": 6,
          "tracking_shuffled_objects/five_objects": 5, "tracking_shuffled_objects/seven_objects": 7,
          "word_sorting": 5}
TEXT_ONLY = ("object_counting", "word_sorting")          # a `target`, no target_scores: no multiple choice
NUMBERS = "zero one two three four five six seven eight nine".split()
WORDS = "apple bridge candle delta ember falcon garnet harbor island jungle kettle lantern meadow".split()


def _scores(options: list[str], right: int) -> dict:
    return {o: int(k == right) for k, o in enumerate(options)}


def _example(task: str, sub: str | None, i: int) -> dict:
    """Example i of a (sub)task, in that task's JSON shape; the right option's place varies with i
    except where the source lists it first (date_understanding, temporal_sequences)."""
    if task == "causal_judgment":
        return {"input": f"Story {i}: a switch was flipped and a lamp lit. Did the switch cause it?",
                "target_scores": {"Yes": i % 2, "No": 1 - i % 2}}
    if task == "date_understanding":
        day = 1 + i % 27
        dates = [f"03/{day + d:02d}/2021" for d in (1, 0, 2, -1 if day > 1 else 3, 4)]
        return {"input": f"Today is 03/{day:02d}/2021. What is the date tomorrow in MM/DD/YYYY?",
                "target_scores": _scores(dates, 0)}
    if task == "disambiguation_qa":
        opts = ["The nurse was busy", "The patient was busy", "Ambiguous"]
        return {"input": f"Sentence {i}: the nurse told the patient that they were busy. Who was busy?",
                "target_scores": _scores(opts, i % 3)}
    if task == "dyck_languages":
        closing = ["] )", ") ]", "] ]", ") )"]
        return {"input": "( [ " * (1 + i % 2) + "( [", "target_scores": _scores(closing, i % 4)}
    if task == "formal_fallacies_syllogisms_negation":
        return {"input": f"Argument {i}: every A is B; some C is not B; so some C is not A.",
                "target_scores": {"valid": 1 - i % 2, "invalid": i % 2}}
    if task == "geometric_shapes":
        shapes = ["circle", "kite", "ellipse", "triangle"]
        right = i % 4
        scores = _scores(shapes, right)
        if right == 0:
            scores["ellipse"] = 1                 # two shapes right at once, as the source has
        return {"input": f'This SVG path element <path d="M {i} 0 L 1 1"/> draws a ', "target_scores": scores}
    if task == "hyperbaton":
        good, bad = f"big old {WORDS[i % 13]} box", f"old big {WORDS[i % 13]} box"
        a, b = (good, bad) if i % 2 else (bad, good)
        return {"input": f'Which sentence has the correct adjective order: a " {a} " b " {b} " ?',
                "target_scores": {"a": i % 2, "b": 1 - i % 2}}
    if task == "logical_deduction":
        n = OBJECTS[sub]
        opts = [f"The {WORDS[k]} is the leftmost." for k in range(n)]
        return {"input": f"Shelf {i}: {n} books stand in a row.", "target_scores": _scores(opts, i % n)}
    if task == "movie_recommendation":
        films = [f"Film {WORDS[(i + k) % 13]}" for k in range(4)]
        return {"input": f"Find a movie similar to Film {i}:", "target_scores": _scores(films, (i * 3) % 4)}
    if task == "navigate":
        return {"input": f"Take {i % 5 + 1} steps. Turn around. Take {i % 3 + 1} steps.",
                "target_scores": {"True": int(i % 5 == i % 3), "False": int(i % 5 != i % 3)}}
    if task == "object_counting":
        n = 2 + i % 5
        return {"input": f"I have {', '.join(WORDS[:n])}. How many things do I have?", "target": [NUMBERS[n], str(n)]}
    if task == "penguins_in_a_table":
        opts = ["Louis", "Bernard", "Vincent", "Gwen", "James"]
        return {"input": f"Table {i}: which penguin is the oldest?", "target_scores": _scores(opts, i % 5)}
    if task == "reasoning_about_colored_objects":
        if i % 2:                                   # a counting question: numbers as digits and as words
            n = i % 4
            return {"input": f"On the desk, {NUMBERS[n]} red pens. How many pens? ",
                    "target_scores": {str(k): int(k == n) for k in range(4)} | {NUMBERS[k]: int(k == n) for k in range(4)}}
        colours = ["red", "blue", "green", "black"]
        return {"input": f"On the desk, a {colours[i % 4]} mug. What colour is the mug?",
                "target_scores": _scores(colours, i % 4)}
    if task == "ruin_names":
        opts = [f"{WORDS[i % 13]} {s}" for s in ("x", "y", "z", "w")]
        return {"input": f"Which edit of the name '{WORDS[i % 13]}' is humorous?", "target_scores": _scores(opts, (i + 1) % 4)}
    if task == "salient_translation_error_detection":
        kinds = ["Modifiers or Adjectives", "Numerical Values", "Negation or Antonyms", "Named Entities",
                 "Dropped Content", "Facts"]
        return {"input": f"Source {i}: ein Satz. Translation: a sentence. The translation contains an error pertaining to",
                "target_scores": _scores(kinds, i % 6)}
    if task == "snarks":
        a, b = f"Salt is gourmet {i}.", f"Caviar is gourmet {i}."
        return {"input": f"Which statement is sarcastic? (a) {a} (b) {b}", "target_scores": {"(a)": i % 2, "(b)": 1 - i % 2}}
    if task == "sports_understanding":
        return {"input": f"Player {WORDS[i % 13]} scored a touchdown", "target_scores": {"plausible": i % 2, "implausible": 1 - i % 2}}
    if task == "temporal_sequences":
        slots = ["5am to 6am", "6am to 7am", "7am to 8am", "8am to 9am"]
        return {"input": f"Day {i}: when could Ann have gone to the park?",
                "target_scores": _scores(slots[i % 4:] + slots[:i % 4], 0)}
    if task == "tracking_shuffled_objects":
        n = OBJECTS[sub]
        opts = [f"the {WORDS[k]} ball." for k in range(n)]
        return {"input": f"Game {i}: {n} players swap balls. At the end, Alice has", "target_scores": _scores(opts, (i * 2) % n)}
    if task == "word_sorting":
        words = WORDS[i % 5:i % 5 + 4][::-1]
        return {"input": " ".join(words), "target": " ".join(sorted(words))}
    raise KeyError(task)


PREFIXES = {"navigate": {"task_prefix": "If you follow these instructions, do you return to the starting point?"},
            "dyck_languages": {"task_prefix": "Complete the rest of the sequence. \n", "example_input_prefix": "\nInput: "},
            "sports_understanding": {"task_prefix": "Determine whether the sentence is plausible or implausible:",
                                     "example_input_prefix": "\nStatement: "},
            "word_sorting": {"task_prefix": "Sort the following words alphabetically:", "example_input_prefix": "\nList: "},
            "logical_deduction": {"task_prefix": "Each paragraph describes objects in a fixed order.\n\n",
                                  "example_input_prefix": ""}}


def task_json(name: str) -> dict:
    """The task.json of a (sub)task: its prefixes and COUNTS[name] examples."""
    task, _, sub = name.partition("/")
    return {"name": name, "description": f"made-up {name}", **PREFIXES.get(task, {}),
            "examples": [_example(task, sub or None, i) for i in range(COUNTS[name])]}


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(f"{ROOT}/{name}")
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_sdist(path: Path, drop: tuple[str, ...] = ()) -> Path:
    """Write the stand-in sdist at `path` (leaving out the source tasks in `drop`)."""
    with tarfile.open(path, "w:gz") as archive:
        for name in COUNTS:
            if name.split("/")[0] not in drop:
                _add(archive, f"{name}/task.json", json.dumps(task_json(name)).encode())
        for task, subs in SUBTASKS.items():               # a parent that only lists its subtasks
            if task not in drop:
                _add(archive, f"{task}/task.json", json.dumps({"name": task, "subtasks": list(subs)}).encode())
        for task in ("boolean_expressions", "multistep_arithmetic", "web_of_lies"):   # programmatic: no task.json
            _add(archive, f"{task}/task.py", b"# a programmatic task\n")
        _add(archive, "arithmetic/task.json", json.dumps(                             # not a BBH source task
            {"name": "arithmetic", "examples": [{"input": "1+1", "target_scores": {"2": 1, "3": 0}}]}).encode())
    return path
