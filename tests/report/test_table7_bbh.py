"""LLA Table 7's two BBH columns: the source tasks' multiple choice (bbh) and BBH's 3-shot generated
exact match (bbh_gen), the one its note sets beside the paper's BBH, each a proportion of its own
documents with its shots in the CSV."""
import csv

import pytest

from loopkv.report import table7, tables
from loopkv.stats.intervals import wilson


def _result(data, headline, value, n, shots):
    return {"task": f"loopkv_{data}", "method": "full", "budget": "1x", "setting": {"ratio": 1.0}, "headline": headline,
            "metrics": {headline: value}, "samples": [], "n": n, "shots": shots}


def test_bbh_gen_has_its_own_column_beside_the_multiple_choice_one(tmp_path):
    rows = table7.build_rows([_result("bbh", "acc", 0.5, 8, 0), _result("bbh_gen", "exact_match", 0.25, 8, 3)])
    row = rows[0]
    assert (row["bbh"], row["bbh_gen"], row["n_bbh_gen"], row["shots_bbh_gen"]) == (0.5, 0.25, 8, 3)
    headers = dict(table7.SPEC.columns)
    assert headers["bbh_gen"] == "BBH 3-shot\nEM" and headers["bbh"] == "BBH src MC\nacc"
    keys = table7.SPEC.keys
    assert keys.index("bbh") + 1 == keys.index("bbh_gen")
    assert table7.SPEC.proportions["bbh_gen"] == "n_bbh_gen"    # its own documents, not bbh's
    assert "bbh_gen" in table7.TASKS and "gsm8k_flexible" not in table7.TASKS
    tables.write_all(rows, table7.spec(rows), table7.note(rows), "t7", tmp_path / "t.pdf", tmp_path / "t.csv",
                     tmp_path / "t.tex")
    line = next(csv.DictReader(open(tmp_path / "t.csv")))
    assert float(line["bbh_gen"]) == 0.25 and line["n_bbh_gen"] == "8" and line["shots_bbh_gen"] == "3"
    ci = wilson(2, 8)                                             # 0.25 of 8 documents
    assert (float(line["bbh_gen_lo"]), float(line["bbh_gen_hi"])) == pytest.approx((ci.lo, ci.hi))
    note = table7.note(rows)
    assert "bbh_gen 3-shot" in note and "bbh_gen 8" in note
    assert "BBH 3-shot EM = BBH's generated exact match, the paper's protocol and the column to set beside its BBH" in note
    assert "BBH src MC = 18 BIG-bench source tasks' multiple choice (log-likelihood), not the paper's protocol" in note
