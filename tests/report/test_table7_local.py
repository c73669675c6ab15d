"""LLA Table 7 with benchmarks read from your files (issue 22): HumanEval+ / MBPP+ get pass@1 base and
pass@1 plus columns beside MBPP, MELT Table 1's benchmarks a column each after the synthetic tasks;
without them the table is as it was. MELT Table 1's paper numbers are keyed by our task names."""
import csv

import pytest

from loopkv.data.local_benchmarks import LOCAL_BENCHMARKS
from loopkv.eval.lm_tasks import LM_TASKS
from loopkv.report import table7, tables
from loopkv.report.paper_values import MELT_TABLE1, MELT_TABLE1_MODELS, MELT_TABLE1_SOURCE


def _result(task, metrics, n, headline):
    samples = [{"doc_id": i, **{m: float(i < round(v * n)) for m, v in metrics.items()}} for i in range(n)]
    return {"task": "loopkv_" + task, "method": "full", "budget": "1x", "setting": {"ratio": 1.0},
            "headline": headline, "metrics": metrics, "samples": samples, "n": n, "shots": 0}


def results():
    return [_result("mbpp", {"pass@1": 0.5}, 4, "pass@1"),
            _result("humaneval_plus", {"pass@1": 0.6, "pass@1_plus": 0.4, "reference_failed": 0.0}, 5, "pass@1"),
            _result("aime24", {"exact_match": 0.25, "exact_match_sympy": 0.25, "checkers_disagree": 0.0,
                               "no_answer": 0.5}, 4, "exact_match"),
            _result("gpqa", {"acc": 0.5, "acc_norm": 0.5}, 2, "acc")]


def test_the_local_benchmarks_get_their_columns(tmp_path):
    rows = table7.build_rows(results())
    row = rows[0]
    assert (row["humaneval_plus"], row["humaneval_plus_plus"], row["humaneval_plus_reference_failed"]) == (0.6, 0.4, 0.0)
    spec = table7.spec(rows)
    keys, headers = spec.keys, dict(spec.columns)
    assert keys[keys.index("mbpp") + 1:keys.index("mbpp") + 3] == ["humaneval_plus", "humaneval_plus_plus"]
    assert headers["humaneval_plus"] == "HumanEval+\npass@1 base" and headers["humaneval_plus_plus"] == "HumanEval+\npass@1 plus"
    assert keys.index("cloze") < keys.index("aime24") < keys.index("gpqa") < keys.index("paper_gsm8k")
    assert "mbpp_plus" not in keys and "aime25" not in keys          # only what the results hold
    tables.write_all(rows, spec, table7.note(rows), "t7", tmp_path / "t.pdf", tmp_path / "t.csv", tmp_path / "t.tex")
    line = next(csv.DictReader(open(tmp_path / "t.csv")))
    assert float(line["humaneval_plus_plus"]) == 0.4 and line["n_humaneval_plus"] == "5"
    assert float(line["humaneval_plus_reference_failed"]) == 0.0
    est = tables.proportion_interval(0.4, 5, "plus")
    assert (float(line["humaneval_plus_plus_lo"]), float(line["humaneval_plus_plus_hi"])) == pytest.approx((est.lo, est.hi))
    note = table7.note(rows)
    assert "pass@1 plus = on every base and plus input" in note and "aime24 4" in note and "humaneval_plus 5" in note
    assert "math-verify" in note and "log-likelihood of the answer letter" in note


def test_without_local_benchmarks_the_table_is_as_it_was():
    rows = table7.build_rows(results()[:1])
    assert table7.spec(rows) is table7.SPEC
    assert "data.local_benchmarks" not in table7.note(rows)


def test_melt_table1_is_keyed_by_runnable_task_names_and_models():
    runnable = {t.data for t in LM_TASKS.values()}
    assert set(MELT_TABLE1) <= runnable and set(MELT_TABLE1) - {"math500", "humaneval"} <= set(LOCAL_BENCHMARKS)
    assert all(set(by_model) <= set(MELT_TABLE1_MODELS) and by_model["melt"] is not None
               and all(0.0 <= v <= 100.0 for v in by_model.values()) for by_model in MELT_TABLE1.values())
    assert "MELT" in MELT_TABLE1_SOURCE and "top-p 0.7" in MELT_TABLE1_SOURCE
