"""BBH from the BIG-bench source tasks: the `task.json` files of PyPI's bigbench==1.0.0 sdist, read from
the file config key `data.bigbench_sdist` names (null: the copy `loopkv fetch-bigbench` puts inside the
environment). Nothing of the sdist is installed or run. Its metadata cannot be built offline, so the
sdist is fetched as a file, sha256-pinned; since December 2026 PyPI no longer serves bigbench 1.0.0's
files (403), so `make setup` tries and goes on without it, and a config with a BBH task needs a copy
(the config check names the key before any job runs).

Of BBH's 23 source tasks, 20 are JSON tasks in the sdist (boolean_expressions, multistep_arithmetic
and web_of_lies are programmatic and left out). Every example with `target_scores` becomes a
log-likelihood multiple-choice row in BIG-bench's own prompt format (task prefix, input and output
prefixes); as in BBH, a seeded sample of 250 examples per (sub)task. BBH itself scores generated
answers by exact match on its own reformatted prompts: `bbh_rows` gives the source tasks' multiple
choice (benchmark `bbh`), `bbh_gen_rows` BBH's generated exact match (benchmark `bbh_gen`).

bbh_gen: each example as a BBH question, "Q: <question>\nA:", its target the string BBH's exact match
compares, and its worked example "Q: ... A: <target>" (BBH's answer-only shots; its chain-of-thought
shots are hand-written and not in the sdist), the same seeded 250 examples a (sub)task as `bbh`.
Per subtask, from what the sdist holds (BBH's own layout: the instruction inside the question, then
"Options:" and "(A) ..." lines, or "- Yes" lines for its yes / no tasks; blank lines collapsed):
- an option letter, "(A)", from `target_scores`: date_understanding, disambiguation_qa, geometric_shapes,
  hyperbaton, logical_deduction (3 / 5 / 7 objects), movie_recommendation, penguins_in_a_table,
  reasoning_about_colored_objects, ruin_names, salient_translation_error_detection, snarks,
  temporal_sequences, tracking_shuffled_objects (3 / 5 / 7 objects). Options in the source's order
  (BBH's own fixed shape, colour and error-type lists among them; elsewhere the correct one's place
  varies), except date_understanding and temporal_sequences, whose source lists the correct choice
  first (364 of 369, 1000 of 1000): shuffled per example, seeded. hyperbaton's and snarks' inputs carry their two options ("a ... b ...",
  "(a) ... (b) ..."), listed as (A) / (B); a number offered twice, as digits and as a word
  (reasoning_about_colored_objects' counting questions), is listed once, as the word (BBH's); where
  several options score highest (geometric_shapes: circle and ellipse, rectangle and trapezoid) the
  first is the target and any of their letters counts (`accept`);
- text, from `target_scores` of a two-way task, as BBH words it: causal_judgment (Yes / No),
  formal_fallacies_syllogisms_negation (valid / invalid), navigate (Yes / No for the source's True /
  False), sports_understanding (yes / no for plausible / implausible, asked as BBH asks it: 'Is the
  following sentence plausible? "..."'); dyck_languages (the closing sequence: the source's one
  correct choice of 84, a free-form target as in BBH);
- text, from `target`: object_counting (the number in digits, as BBH; the source's word form also
  counts), word_sorting (the sorted words).
Dropped: BBH's boolean_expressions, multistep_arithmetic_two and web_of_lies, programmatic BIG-bench
tasks (a task.py, no task.json, and nothing of the sdist is run). 24 subtasks in all (BBH has 27).
"""
from __future__ import annotations

import random
import re
import sys
import tarfile
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import check_fields, parse_json
from loopkv.utils.provenance import file_sha256

SDIST = "bigbench-1.0.0.tar.gz"
SDIST_URL = ("https://files.pythonhosted.org/packages/95/f8/c019b3579df548a04cac12342cfcb878e50ddf6cfcd7fddba8cfc721c157/"
             + SDIST)
SDIST_SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
BBH_SOURCE_TASKS = (
    "causal_judgment", "date_understanding", "disambiguation_qa", "dyck_languages",
    "formal_fallacies_syllogisms_negation", "geometric_shapes", "hyperbaton", "logical_deduction",
    "movie_recommendation", "navigate", "object_counting", "penguins_in_a_table",
    "reasoning_about_colored_objects", "ruin_names", "salient_translation_error_detection", "snarks",
    "sports_understanding", "temporal_sequences", "tracking_shuffled_objects", "word_sorting")
PER_TASK = 250
_MEMBER = re.compile(r"^bigbench-1\.0\.0/bigbench/benchmark_tasks/([^/]+)/(?:([^/]+)/)?task\.json$")


CONFIG_KEY = "data.bigbench_sdist"


def sdist_path() -> Path:
    """Where `loopkv fetch-bigbench` puts the sdist: inside the environment, like installed package data."""
    return Path(sys.prefix) / "share" / "loopkv" / SDIST


def configured_sdist(value: str | None) -> Path:
    """The sdist a run reads: the path data.bigbench_sdist names, or (null) the environment's copy."""
    return Path(value) if value is not None else sdist_path()


def fetch_sdist(dest: Path | None = None) -> Path:
    """Download the sdist from PyPI once (sha256-checked); a present, intact copy is kept."""
    import urllib.error
    import urllib.request

    dest = Path(dest or sdist_path())
    if dest.is_file() and file_sha256(dest) == SDIST_SHA256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    try:
        with urllib.request.urlopen(SDIST_URL, timeout=300) as response, open(tmp, "wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
    except (urllib.error.URLError, OSError) as e:    # HTTPError is a URLError
        tmp.unlink(missing_ok=True)
        raise LoopKVError(f"cannot download {SDIST} from PyPI ({e}); PyPI has not served bigbench 1.0.0's "
                          f"files since December 2026. BBH's tasks (bbh, bbh_gen) need a copy: put it at {dest} "
                          f"or name it in config key {CONFIG_KEY}; every other task runs without it") from e
    if file_sha256(tmp) != SDIST_SHA256:
        tmp.unlink()
        raise LoopKVError(f"{SDIST} from PyPI does not have the pinned sha256 {SDIST_SHA256}")
    tmp.replace(dest)
    return dest


def _row(task: dict, example: dict) -> dict | None:
    if "target_scores" not in example:
        return None
    prefix = task.get("task_prefix") or ""
    input_prefix = task.get("example_input_prefix", "\nQ: ")
    output_prefix = task.get("example_output_prefix", "\nA: ")
    choices = list(example["target_scores"])
    scores = [example["target_scores"][c] for c in choices]
    # the answer opens with the output prefix's trailing space, as the choices carry their own
    space = " " if output_prefix.endswith(" ") else ""
    context = (prefix + input_prefix + example["input"] + output_prefix[:len(output_prefix) - len(space)]).lstrip("\n")
    return {"context": context, "choices": [space + c for c in choices], "label": scores.index(max(scores))}


def _source_tasks(sdist: Path):
    """(name, task.json) of every BBH source (sub)task in the sdist, in member order; a parent task that
    only lists its subtasks is skipped. Raises when a source task is missing."""
    sdist = Path(sdist)
    if not sdist.is_file():
        raise LoopKVError(f"BBH needs {sdist} (PyPI bigbench==1.0.0's sdist, config key {CONFIG_KEY}): "
                          f"no such file")
    try:
        archive = tarfile.open(sdist)
        members = sorted(archive.getmembers(), key=lambda m: m.name)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise LoopKVError(f"BBH sdist {sdist} is corrupt or truncated ({type(e).__name__}: {e}); "
                          "delete it and run `loopkv fetch-bigbench`") from e
    seen = set()
    with archive:
        for member in members:
            match = _MEMBER.match(member.name)
            if not match or match.group(1) not in BBH_SOURCE_TASKS:
                continue
            where = f"BBH sdist {sdist} member {member.name}"
            try:
                text = archive.extractfile(member).read()
            except (tarfile.TarError, EOFError, OSError, AttributeError) as e:
                raise LoopKVError(f"{where} cannot be read ({type(e).__name__}: {e})") from e
            task = check_fields(parse_json(text, where), {}, where)
            if "examples" not in task:       # a parent task that only lists its subtasks
                continue
            seen.add(match.group(1))
            yield match.group(1) + (f"/{match.group(2)}" if match.group(2) else ""), task
    missing = sorted(set(BBH_SOURCE_TASKS) - seen)
    if missing:
        raise LoopKVError(f"{sdist} lacks BBH source tasks {missing}")


def _sample(name: str, count: int) -> list[int]:
    """BBH's seeded 250 of a (sub)task's examples (indices, in file order); bbh and bbh_gen draw the same."""
    return sorted(random.Random(f"bbh:{name}").sample(range(count), min(PER_TASK, count)))


def bbh_rows(sdist: Path) -> tuple[list[dict], dict]:
    """(rows, stats): BBH's source tasks' multiple-choice rows, 250 a (sub)task, in task order."""
    rows, stats = [], {}
    for name, task in _source_tasks(sdist):
        made = [r for r in (_row(task, e) for e in task["examples"]) if r is not None]
        picked = _sample(name, len(made))
        rows += [{**made[i], "subtask": name} for i in picked]
        stats[name] = {"examples": len(task["examples"]), "multiple_choice": len(made), "kept": len(picked)}
    return rows, stats


# ---------------------------------------------------------------- bbh_gen: BBH's generated exact match

# BBH subtasks the sdist cannot give, and why (reported in bbh_gen's manifest)
BBH_GEN_DROPPED = {name: "a programmatic BIG-bench task (task.py, no task.json; nothing of the sdist is run)"
                   for name in ("boolean_expressions", "multistep_arithmetic_two", "web_of_lies")}
# two-way tasks BBH asks as text: source choice -> BBH's word, in BBH's order of listing
_WORDS = {"causal_judgment": {"Yes": "Yes", "No": "No"},
          "formal_fallacies_syllogisms_negation": {"valid": "valid", "invalid": "invalid"},
          "navigate": {"True": "Yes", "False": "No"},
          "sports_understanding": {"plausible": "yes", "implausible": "no"}}
_FREE = ("dyck_languages",)                                  # target_scores, but a free-form target in BBH
_SHUFFLED = ("date_understanding", "temporal_sequences")     # the source lists the correct choice first
# tasks whose input carries its two options: (question, first, second) and the choices naming them
_TWO = {"hyperbaton": (re.compile(r'^(.*?:)\s*a "\s*(.*?)\s*"\s*b "\s*(.*?)\s*"\s*\?$', re.S), ("a", "b")),
        "snarks": (re.compile(r"^(.*?\?)\s*\(a\)\s*(.*?)\s*\(b\)\s*(.*)$", re.S), ("(a)", "(b)"))}
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def answer_kind(answer: str) -> str:
    """'option' for an option letter target "(A)", 'text' for any other."""
    return "option" if re.fullmatch(r"\([A-Z]\)", answer) else "text"


def _layout(text: str) -> str:
    """BBH's layout: blank lines and the spaces around line breaks collapsed, the ends stripped."""
    return re.sub(r"[ \t]*\n\s*", "\n", text).strip()


def _option(text: str) -> str:
    text = text.strip()
    return text[:-1].rstrip() if text.endswith(".") else text     # BBH lists options without their period


def _gen_example(name: str, task: dict, example: dict, index: int) -> tuple[str, str, list[str]]:
    """(question, target, accepted targets) of one source example as BBH asks it."""
    base = name.split("/")[0]
    prefix, sep = task.get("task_prefix") or "", task.get("example_input_prefix")
    text = example["input"]
    question = _layout(prefix + (sep if sep is not None else (" " if prefix else "")) + text)
    if "target_scores" not in example:                        # object_counting, word_sorting
        targets = [example["target"]] if isinstance(example["target"], str) else list(example["target"])
        answer = next((t for t in targets if t.isdigit()), targets[0])    # BBH's numbers are digits
        return question, answer, [answer, *(t for t in targets if t != answer)]
    scores = example["target_scores"]
    best = max(scores.values())
    if base in _WORDS:
        words = _WORDS[base]
        if set(scores) != set(words):
            raise LoopKVError(f"BBH {name} example {index}: choices {sorted(scores)}, expected {sorted(words)}")
        answer = words[max(scores, key=scores.get)]
        if base == "sports_understanding":
            sentence = text.strip()
            return (f'Is the following sentence plausible? "{sentence}{"" if sentence[-1:] in ".!?" else "."}"',
                    answer, [answer])
        return question + "\nOptions:\n" + "\n".join(f"- {w}" for w in words.values()), answer, [answer]
    if base in _FREE:
        answer = max(scores, key=scores.get)
        return question, answer, [answer]
    if base in _TWO:
        pattern, keys = _TWO[base]
        found = pattern.match(text)
        if not found or set(scores) != set(keys):
            raise LoopKVError(f"BBH {name} example {index}: its input does not hold the two options: {text[:200]!r}")
        question, first, second = found.groups()
        options = [(first, scores[keys[0]]), (second, scores[keys[1]])]
    else:
        merged = dict(scores)
        for digits in [c for c in scores if c.isdigit() and int(c) < len(_NUMBER_WORDS)]:
            if _NUMBER_WORDS[int(digits)] in merged:    # a number given twice: listed once, as its word
                word = _NUMBER_WORDS[int(digits)]
                merged[word] = max(merged[word], merged.pop(digits))
        options = list(merged.items())
        if base in _SHUFFLED:
            random.Random(f"bbh_gen:{name}:{index}").shuffle(options)
    if len(options) > len(LETTERS):
        raise LoopKVError(f"BBH {name} example {index}: {len(options)} options, more than letters")
    letters = [f"({LETTERS[i]})" for i, (_, v) in enumerate(options) if v == best]
    listing = "\n".join(f"({LETTERS[i]}) {_option(c)}" for i, (c, _) in enumerate(options))
    return _layout(question) + "\nOptions:\n" + listing, letters[0], letters


def bbh_gen_rows(sdist: Path) -> tuple[list[dict], dict]:
    """(rows, stats): BBH's generated exact-match rows {prompt, answer, accept, shot, subtask}, 250 a
    (sub)task (the same examples as `bbh_rows`), in task order; stats per subtask and the dropped ones."""
    rows, stats = [], {}
    for name, task in _source_tasks(sdist):
        picked = _sample(name, len(task["examples"]))
        made = []
        for i in picked:
            question, answer, accept = _gen_example(name, task, task["examples"][i], i)
            prompt = f"Q: {question}\nA:"
            made.append({"prompt": prompt, "answer": answer, "accept": accept, "shot": f"{prompt} {answer}",
                         "subtask": name})
        rows += made
        kinds = sorted({answer_kind(r["answer"]) for r in made})
        stats[name] = {"examples": len(task["examples"]), "kept": len(made), "answer": " and ".join(kinds)}
    return rows, {"subtasks": stats, "dropped": dict(BBH_GEN_DROPPED)}
