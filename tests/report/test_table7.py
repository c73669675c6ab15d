"""LLA Table 7 with a benchmark run two ways (issue 22): the greedy run in its usual column, the
sampled variant in a column of its own, labelled with its decoding, pass@1 with a bootstrap interval
over documents; a greedy variant with its Wilson interval."""
import csv

import pytest

from loopkv.report import table7, tables
from loopkv.stats.intervals import pass_at_k_interval, wilson


def _result(task_id, metrics, samples, variant=None, decoding=None, headline="exact_match"):
    r = {"task": "loopkv_" + task_id.split("-")[0], "method": "full", "budget": "1x", "setting": {"ratio": 1.0},
         "headline": headline, "metrics": metrics, "samples": samples, "n": len(samples), "shots": 0}
    if variant:
        r.update(task_id=task_id, variant=variant, decoding=decoding,
                 samples_per_doc=(decoding or {}).get("samples", 1))
    return r


SAMPLED = {"strategy": "sampling", "temperature": 1.0, "top_p": 0.7, "samples": 4, "seed": 9}
# 5 documents, 4 samples each: 2, 0, 3, 4 and 1 correct -> pass@1 = (0.5 + 0 + 0.75 + 1 + 0.25) / 5 = 0.5
CORRECT = [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 1, 0]]


def results():
    greedy = _result("gsm8k", {"exact_match": 0.4, "exact_match_flexible": 0.6, "no_answer": 0.0},
                     [{"doc_id": i, "exact_match": float(i < 2)} for i in range(5)])
    sampled = _result("gsm8k-sampled", {"exact_match": 0.5, "exact_match_flexible": 0.5, "no_answer": 0.0},
                      [{"doc_id": i, "exact_match": sum(c) / 4, "per_sample": {"exact_match": [float(x) for x in c]},
                        "outputs": ["..."] * 4} for i, c in enumerate(CORRECT)], variant="sampled", decoding=SAMPLED)
    zero_shot = _result("gsm8k-zs", {"exact_match": 0.2}, [{"doc_id": i, "exact_match": float(i == 0)} for i in range(5)],
                        variant="zs", decoding={"strategy": "greedy"})
    return [greedy, sampled, zero_shot]


def test_the_variants_get_columns_of_their_own():
    rows = table7.build_rows(results())
    row = rows[0]
    assert (row["gsm8k"], row["gsm8k_flexible"]) == (0.4, 0.6)     # the greedy run keeps its columns
    assert (row["gsm8k-sampled"], row["gsm8k-zs"]) == (0.5, 0.2)
    assert (row["n_gsm8k-sampled"], row["samples_gsm8k-sampled"]) == (5, 4)
    spec = table7.spec(rows)
    headers = dict(spec.columns)
    assert headers["gsm8k-sampled"] == "GSM8K pass@1\nT=1.0 p=0.7\nn=4"
    assert headers["gsm8k-zs"] == "GSM8K EM\nzs: greedy"
    keys = spec.keys
    assert keys.index("gsm8k-sampled") < keys.index("paper_gsm8k") and keys.index("cloze") < keys.index("gsm8k-sampled")
    assert table7.spec(table7.build_rows(results()[:1])) is table7.SPEC    # no variant: the table as it was


def test_a_sampled_column_is_pass_at_1_with_a_bootstrap_interval_over_documents():
    row = table7.build_rows(results())[0]
    est = pass_at_k_interval([4] * 5, [sum(c) for c in CORRECT], 1)
    assert est.value == pytest.approx(0.5)
    assert (row["gsm8k-sampled_lo"], row["gsm8k-sampled_hi"]) == (est.lo, est.hi)
    assert 0.0 < est.lo < 0.5 < est.hi < 1.0


def test_the_files_carry_the_variants(tmp_path):
    rows = table7.build_rows(results())
    spec = table7.spec(rows)
    tables.write_all(rows, spec, table7.note(rows), "t7", tmp_path / "t.pdf", tmp_path / "t.csv", tmp_path / "t.tex")
    line = next(csv.DictReader(open(tmp_path / "t.csv")))
    assert float(line["gsm8k-sampled"]) == 0.5 and line["decoding_gsm8k-sampled"] == "T=1.0 p=0.7 n=4"
    assert float(line["gsm8k-sampled_lo"]) == rows[0]["gsm8k-sampled_lo"]
    zs = wilson(1, 5)                                    # the greedy variant: a proportion of its 5 documents
    assert (float(line["gsm8k-zs_lo"]), float(line["gsm8k-zs_hi"])) == pytest.approx((zs.lo, zs.hi))
    note = table7.note(rows)
    assert "gsm8k-sampled (T=1.0 p=0.7 n=4: nucleus sampling" in note and "gsm8k-zs (greedy, 0-shot)" in note
    assert "bootstrap over documents" in note
    assert "GSM8K pass@1 T=1.0 p=0.7 n=4" in (tmp_path / "t.tex").read_text()   # its lines joined


def test_a_sampled_result_whose_samples_disagree_with_its_metric_is_refused():
    bad = results()
    bad[1]["metrics"]["exact_match"] = 0.6
    with pytest.raises(Exception, match="pass@1"):
        table7.build_rows(bad)
