"""BBH as generated exact match (data/bigbench.py bbh_gen_rows): each source example asked as BBH asks
it (hand-written references from BBH's own layout), which subtasks the sdist gives and which it cannot,
and the rows of an sdist in BIG-bench's layout (tests/bigbench_sdist.py: PyPI no longer serves the real
one): 250 a subtask at most, the same examples as `bbh`, worked examples of their own."""
import json
from collections import Counter

import pytest
from bigbench_sdist import COUNTS, TEXT_ONLY, write_sdist

from loopkv.data import bigbench
from loopkv.data.bigbench import _gen_example
from loopkv.errors import LoopKVError

PREFIX = "If you follow these instructions, do you return to the starting point?"


@pytest.mark.parametrize("name, task, example, expected", [
    # a two-way task asked as BBH words it: True / False -> "- Yes / - No", the task prefix inside the question
    ("navigate", {"task_prefix": PREFIX}, {"input": "Take 1 step. Turn around.", "target_scores": {"True": 0, "False": 1}},
     (PREFIX + " Take 1 step. Turn around.\nOptions:\n- Yes\n- No", "No", ["No"])),
    ("sports_understanding", {"task_prefix": "Determine whether ... plausible or implausible:",
                              "example_input_prefix": "\nStatement: "},
     {"input": "Jamal Murray was perfect from the line", "target_scores": {"plausible": 1, "implausible": 0}},
     ('Is the following sentence plausible? "Jamal Murray was perfect from the line."', "yes", ["yes"])),
    # options in the source's order, their period dropped, the blank line after the prefix collapsed
    ("logical_deduction/three_objects", {"task_prefix": "Three objects.\n\n", "example_input_prefix": ""},
     {"input": "A shelf: a red book, a blue book. The red book is left.",
      "target_scores": {"The red book is the leftmost.": 1, "The blue book is the leftmost.": 0}},
     ("Three objects.\nA shelf: a red book, a blue book. The red book is left.\nOptions:\n"
      "(A) The red book is the leftmost\n(B) The blue book is the leftmost", "(A)", ["(A)"])),
    # hyperbaton's and snarks' inputs carry their two options
    ("hyperbaton", {}, {"input": 'Which sentence has the correct adjective order: a " rubber terrible ship " '
                                 'b " terrible rubber ship " ?', "target_scores": {"a": 0, "b": 1}},
     ("Which sentence has the correct adjective order:\nOptions:\n(A) rubber terrible ship\n(B) terrible rubber ship",
      "(B)", ["(B)"])),
    ("snarks", {}, {"input": "Which statement is sarcastic? (a) Salt is gourmet. (b) Caviar is gourmet.",
                    "target_scores": {"(a)": 1, "(b)": 0}},
     ("Which statement is sarcastic?\nOptions:\n(A) Salt is gourmet\n(B) Caviar is gourmet", "(A)", ["(A)"])),
    # a number offered as digits and as a word is listed once, as the word; the trailing space stripped
    ("reasoning_about_colored_objects", {},
     {"input": "On the desk, two red pens. How many pens? ",
      "target_scores": {"0": 0, "zero": 0, "1": 0, "one": 0, "2": 1, "two": 1}},
     ("On the desk, two red pens. How many pens?\nOptions:\n(A) zero\n(B) one\n(C) two", "(C)", ["(C)"])),
    # two options scoring highest: the first is the target, either letter counts
    ("geometric_shapes", {}, {"input": "This SVG path element <path d=\"A\"/> draws a ",
                              "target_scores": {"circle": 1, "kite": 0, "ellipse": 1}, "target": "circle"},
     ('This SVG path element <path d="A"/> draws a\nOptions:\n(A) circle\n(B) kite\n(C) ellipse', "(A)",
      ["(A)", "(C)"])),
    # free-form targets: dyck's one correct closing of many choices, object_counting's digits (its word too)
    ("dyck_languages", {"task_prefix": "Complete the rest of the sequence. \n", "example_input_prefix": "\nInput: "},
     {"input": "[ { [", "target_scores": {"]": 0, "] } ]": 1, "} ]": 0}},
     ("Complete the rest of the sequence.\nInput: [ { [", "] } ]", ["] } ]"])),
    ("object_counting", {}, {"input": "I have a flute and a piano. How many instruments do I have?",
                             "target": ["two", "2"]},
     ("I have a flute and a piano. How many instruments do I have?", "2", ["2", "two"])),
    ("word_sorting", {"task_prefix": "Sort the following words alphabetically:", "example_input_prefix": "\nList: "},
     {"input": "oven costume counterpart", "target": "costume counterpart oven"},
     ("Sort the following words alphabetically:\nList: oven costume counterpart", "costume counterpart oven",
      ["costume counterpart oven"])),
])
def test_a_source_example_is_asked_as_bbh_asks_it(name, task, example, expected):
    assert _gen_example(name, task, example, 0) == expected


def test_options_listing_the_correct_choice_first_are_shuffled_per_example_and_seeded():
    example = {"input": "Today is 01/02/2020. What is the date today?",
               "target_scores": {"01/02/2020": 1, "01/03/2020": 0, "02/02/2020": 0, "01/01/2019": 0, "12/02/2020": 0}}
    letters = set()
    for index in range(12):
        question, answer, accept = _gen_example("date_understanding", {}, example, index)
        assert question == _gen_example("date_understanding", {}, example, index)[0]      # seeded: the same twice
        assert f"\n{answer} 01/02/2020\n" in question + "\n" and accept == [answer]      # the target names it
        letters.add(answer)
    assert len(letters) > 2                                   # not always (A), as the source order would give


@pytest.fixture(scope="module")
def gen_rows(bigbench_sdist):
    return bigbench.bbh_gen_rows(bigbench_sdist)


TEXT_SUBTASKS = {"causal_judgment", "dyck_languages", "formal_fallacies_syllogisms_negation", "navigate",
                 "object_counting", "sports_understanding", "word_sorting"}


def test_the_sdist_gives_24_of_bbhs_27_subtasks_250_each_at_most(gen_rows):
    """(On the real sdist, measured before PyPI stopped serving it: 5770 rows, causal_judgment 190,
    penguins_in_a_table 149, snarks 181, the others 250.)"""
    rows, stats = gen_rows
    per = Counter(r["subtask"] for r in rows)
    assert len(per) == 24 and len(per) + len(stats["dropped"]) == 27
    assert set(stats["dropped"]) == {"boolean_expressions", "multistep_arithmetic_two", "web_of_lies"}
    assert per == {name: min(count, 250) for name, count in COUNTS.items()}      # navigate: 260 -> 250
    assert bigbench.PER_TASK == 250
    kinds = {name: s["answer"] for name, s in stats["subtasks"].items()}
    assert {n for n, k in kinds.items() if k == "text"} == TEXT_SUBTASKS
    assert all(k == "option" for n, k in kinds.items() if n not in TEXT_SUBTASKS)


def test_rows_are_bbh_questions_with_their_own_worked_example(gen_rows):
    rows, _ = gen_rows
    for r in rows:
        assert r["prompt"].startswith("Q: ") and r["prompt"].endswith("\nA:") and "\n\n" not in r["prompt"]
        assert r["shot"] == f"{r['prompt']} {r['answer']}" and r["answer"] in r["accept"]
        if r["subtask"] not in TEXT_SUBTASKS:
            assert "\nOptions:\n(A) " in r["prompt"] and f"\n{r['answer']} " in r["prompt"]
    # no option subtask gives its answer away by position (the source lists some correct choices first)
    for subtask in {r["subtask"] for r in rows} - TEXT_SUBTASKS:
        letters = Counter(r["answer"] for r in rows if r["subtask"] == subtask)
        assert max(letters.values()) / sum(letters.values()) < 0.6, (subtask, letters)
    navigate = Counter(r["answer"] for r in rows if r["subtask"] == "navigate")
    assert set(navigate) == {"Yes", "No"}


def test_the_generated_rows_are_bbhs_multiple_choice_examples(gen_rows, bigbench_sdist):
    """The same seeded examples as `bbh` (log-likelihood): the two columns of Table 7 score the same items."""
    mc, _ = bigbench.bbh_rows(bigbench_sdist)
    gen, _ = gen_rows
    for subtask in ("date_understanding", "penguins_in_a_table", "tracking_shuffled_objects/three_objects"):
        a = [r for r in mc if r["subtask"] == subtask]
        b = [r for r in gen if r["subtask"] == subtask]
        assert len(a) == len(b)
        assert all(y["prompt"].removeprefix("Q: ").split("\nOptions:")[0] == x["context"].removeprefix("Q: ").removesuffix("\nA:")
                   for x, y in zip(a, b))


def test_data_bench_records_the_subtasks_and_the_dropped_ones(tmp_path, bigbench_sdist):
    from loopkv.cli import main
    from loopkv.utils.provenance import file_sha256

    assert main(["data-bench", "bbh_gen", "--source", str(bigbench_sdist), "--out", str(tmp_path / "bbh_gen")]) == 0
    manifest = json.loads((tmp_path / "bbh_gen" / "manifest.json").read_text())
    sdist = manifest["stats"]["sources"][0]
    assert (sdist["path"], sdist["config_key"], sdist["version"]) == (str(bigbench_sdist), "data.bigbench_sdist", "1.0.0")
    assert sdist["sha256"] == file_sha256(bigbench_sdist)
    assert len(sdist["subtasks"]) == 24 and sdist["subtasks"]["navigate"] == {"examples": 260, "kept": 250,
                                                                              "answer": "text"}
    assert "programmatic" in sdist["dropped"]["web_of_lies"]
    assert manifest["stats"]["examples"] == sum(min(c, 250) for c in COUNTS.values()) and manifest["stats"]["kind"] == "bbh"


def test_bbh_reads_only_the_file_its_config_key_names(tmp_path, bigbench_sdist):
    """No sdist given, a missing one, one lacking a source task, a truncated one: each refused by name."""
    from loopkv.data.benchmarks import get_benchmark

    for name in ("bbh", "bbh_gen"):
        with pytest.raises(LoopKVError, match="config key 'data.bigbench_sdist' names: none given"):
            get_benchmark(name).read()
    with pytest.raises(LoopKVError, match=r"nothing\.tar\.gz .*data\.bigbench_sdist.*no such file"):
        bigbench.bbh_rows(tmp_path / "nothing.tar.gz")
    with pytest.raises(LoopKVError, match=r"lacks BBH source tasks \['snarks'\]"):
        bigbench.bbh_gen_rows(write_sdist(tmp_path / "no-snarks.tar.gz", drop=("snarks",)))
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(bigbench_sdist.read_bytes()[:2000])
    with pytest.raises(LoopKVError, match="corrupt or truncated"):
        bigbench.bbh_rows(cut)


def test_the_multiple_choice_rows_leave_out_the_free_form_tasks(bigbench_sdist):
    rows, stats = bigbench.bbh_rows(bigbench_sdist)
    per = Counter(r["subtask"] for r in rows)
    assert per == {name: min(count, 250) for name, count in COUNTS.items() if name not in TEXT_ONLY}
    assert all(stats[name]["kept"] == 0 for name in TEXT_ONLY)


def test_a_listed_bbh_task_needs_its_sdist_before_any_job(tmp_path, bigbench_sdist, monkeypatch):
    """data.bigbench_sdist names the file (checked only when a task reads it); null means the
    environment's copy, and a missing one is refused naming the task's entry."""
    from loopkv.config import load_config

    monkeypatch.setattr(bigbench, "sdist_path", lambda: tmp_path / "env" / bigbench.SDIST)
    tasks = {"lm_eval": {"tasks": [{"name": "gsm8k"}, {"name": "bbh"}]}}
    with pytest.raises(LoopKVError, match=r"config key 'lm_eval\.tasks\[1\]\.name': task 'bbh' reads BBH's source tasks"
                                          r".*data\.bigbench_sdist is null and this environment has no copy"):
        load_config(tasks)
    with pytest.raises(LoopKVError, match=r"config key 'data\.bigbench_sdist': BIG-bench sdist .* does not exist"):
        load_config({**tasks, "data": {"bigbench_sdist": str(tmp_path / "none.tar.gz")}})
    assert load_config({**tasks, "data": {"bigbench_sdist": str(bigbench_sdist)}})["data"]["bigbench_sdist"] == str(bigbench_sdist)
    assert load_config({"data": {"bigbench_sdist": str(tmp_path / "none.tar.gz")}})     # no BBH task: not read
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / bigbench.SDIST).write_bytes(bigbench_sdist.read_bytes())
    assert load_config(tasks)["data"]["bigbench_sdist"] is None                          # the environment's copy


def test_fetch_bigbench_says_why_it_failed_and_setup_goes_on(tmp_path, monkeypatch, capsys):
    """A download that fails (PyPI answers 403 since December 2026) is an error naming the key to set;
    with --if-served (make setup) a warning, exit 0, and no partial file left."""
    from loopkv.cli import main

    monkeypatch.setattr(bigbench, "SDIST_URL", (tmp_path / "no-such-file.tar.gz").as_uri())
    dest = tmp_path / "share" / bigbench.SDIST
    with pytest.raises(LoopKVError, match=r"cannot download bigbench-1\.0\.0\.tar\.gz .*data\.bigbench_sdist"):
        bigbench.fetch_sdist(dest)
    assert main(["fetch-bigbench", "--dest", str(dest), "--if-served"]) == 0
    assert "warning: cannot download" in capsys.readouterr().err
    assert not dest.exists() and not dest.with_suffix(".part").exists()
    assert main(["fetch-bigbench", "--dest", str(dest)]) != 0
