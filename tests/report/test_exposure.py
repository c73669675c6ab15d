"""LLA Table 4 / Figure 7 from samples: rates, the paper's rows this run does not have, intervals."""
import csv

import pytest

from loopkv.errors import LoopKVError
from loopkv.report import exposure, tables
from loopkv.report.paper_values import TABLE4


def _samples(correct: list[bool], answered: list[bool], lengths: list[int]) -> list[dict]:
    rows = [{"id": i, "correct": c, "output": "x #### 7" if a else "x", "n_generated": n}
            for i, (c, a, n) in enumerate(zip(correct, answered, lengths))]
    return exposure.arithmetic_outcomes({"samples": {"arithmetic": rows}})


def _cell(ratio: float) -> dict:
    off = _samples([True, False, False, False], [True, True, False, False], [3, 5, 9, 12])
    on = _samples([True, True, True, False], [True, True, True, True], [3, 5, 9, 12])
    metrics = {"method": "lla", "budget": "4x", "setting": {"ratio": ratio}, "fidelity": {"kl": 0.1}}
    return {"off": metrics, "on": {**metrics, "fidelity": {"kl": 0.05}}, "off_samples": off, "on_samples": on,
            "off_curve": {"best": {"kl": 0.2}},
            "on_curve": {"best": {"kl": 0.1, "window_kl": 0.15, "step": 2},
                         "curve": {"train": [{"step": 2}], "heldout": [{"kl": 0.3}]}}}


def test_rows_rates_and_the_papers_other_ratios_as_not_run(tmp_path):
    teacher = _samples([True] * 4, [True] * 4, [3, 5, 9, 12])
    rows = exposure.table_rows([_cell(4.0)], teacher)
    assert (rows[0]["em_off"], rows[0]["em_on"], rows[0]["no_answer_off"], rows[0]["no_answer_on"]) == (0.25, 0.75, 0.5, 0)
    assert rows[0]["paper_on"] == TABLE4[4.0]["on"]
    assert [(r["budget"], r["ratio"]) for r in rows[1:]] == [("not run", k) for k in TABLE4 if k != 4.0]
    assert rows[1]["paper_off"] == TABLE4[3.2]["off"]
    tables.write_all(rows, exposure.SPEC, exposure.table_note(rows), "t", tmp_path / "t.pdf", tmp_path / "t.csv",
                     tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    from scipy.stats import binomtest
    ci = binomtest(1, 4).proportion_ci(method="wilson")
    assert (float(read[0]["em_off_lo"]), float(read[0]["em_off_hi"])) == pytest.approx((ci.low, ci.high))


def test_exposure_figure_draws_every_bin(tmp_path):
    cell = _cell(4.0)
    teacher = exposure.exposure_curve(cell["on_samples"], 4)
    curves = [{"budget": "4x", "teacher": teacher, "off": exposure.exposure_curve(cell["off_samples"], 4),
               "on": exposure.exposure_curve(cell["on_samples"], 4)}]
    assert [(p["lo"], p["n"]) for p in curves[0]["off"]] == [(0, 1), (4, 1), (8, 1), (12, 1)]
    exposure.plot_exposure(curves, 4, tmp_path / "f.pdf", tmp_path / "f.png", 50)
    assert (tmp_path / "f.pdf").read_bytes().startswith(b"%PDF")


def _lm_result(exact: list[float], no_answer: list[float], outputs: list[str], training) -> dict:
    """A merged greedy lm-eval result of MATH-500 (the fields lm-eval-merge writes)."""
    return {"task_id": "math500", "headline": "exact_match", "shots": 4, "codec_training": training,
            "samples": [{"doc_id": d, "exact_match": e, "no_answer": a, "output": o}
                        for d, (e, a, o) in enumerate(zip(exact, no_answer, outputs))]}


def test_benchmark_outcomes_read_lm_eval_results_and_count_output_tokens():
    words = len   # a stand-in tokenizer: one token per character, so lengths are checkable by eye
    result = _lm_result([1.0, 0.0, 0.0], [0.0, 0.0, 1.0], ["ab", "abcd", ""], "on_policy")
    got = exposure.benchmark_outcomes(result, words, "r.json", "on_policy")
    assert got == [{"id": 0, "correct": True, "no_answer": False, "n_generated": 2},
                   {"id": 1, "correct": False, "no_answer": False, "n_generated": 4},
                   {"id": 2, "correct": False, "no_answer": True, "n_generated": 0}]
    assert exposure.rates(got) == {"em": 1 / 3, "no_answer": 1 / 3, "n": 3}


def test_benchmark_outcomes_refuse_the_wrong_codec_or_sampled_runs():
    result = _lm_result([1.0], [0.0], ["a"], "off_policy")
    with pytest.raises(LoopKVError, match="served off_policy codec, Table 4 expects on_policy"):
        exposure.benchmark_outcomes(result, len, "r.json", "on_policy")
    with pytest.raises(LoopKVError, match="expects none"):
        exposure.benchmark_outcomes(result, len, "r.json", None)
    with pytest.raises(LoopKVError, match="a sampled result"):
        exposure.benchmark_outcomes({**result, "samples_per_doc": 4}, len, "r.json", "off_policy")


def test_benchmark_table_heads_its_columns_by_the_task_and_checks_the_items(tmp_path):
    teacher = exposure.benchmark_outcomes(_lm_result([1.0] * 4, [0.0] * 4, ["a"] * 4, None), len, "t", None)
    cell = _cell(3.2)
    rows = exposure.table_rows([cell], teacher, "math500")
    assert rows[0]["source"] == "math500" and rows[0]["n_items"] == 4 and rows[0]["paper_off"] == TABLE4[3.2]["off"]
    spec = exposure.table_spec("math500")
    assert dict(spec.columns)["em_off"] == "MATH-500 acc.\noff-policy"
    assert "MATH-500 through lm-eval (greedy, n=4 documents, 4-shot)" in exposure.table_note(rows, 4)
    other = exposure.benchmark_outcomes(_lm_result([1.0] * 3, [0.0] * 3, ["a"] * 3, None), len, "t", None)
    with pytest.raises(LoopKVError, match="off-policy math500 items are not the teacher's"):
        exposure.table_rows([cell], other, "math500")


def test_benchmark_outcomes_check_the_model_and_read_results_merged_before_codecs_were_recorded():
    result = {**_lm_result([1.0], [0.0], ["a"], "off_policy"), "method": "lla", "budget": "4x"}
    with pytest.raises(LoopKVError, match="a result of lla/4x, Table 4 expects lla/21.33x"):
        exposure.benchmark_outcomes(result, len, "r.json", "off_policy", ("lla", "21.33x"))
    old = {k: v for k, v in result.items() if k != "codec_training"}
    old["provenance"] = {"merged_from": {"s0.json": {"inputs": {"teacher": {}, "codec": {}}}}}
    assert exposure.served_codec(old) == "off_policy"
    assert exposure.benchmark_outcomes(old, len, "r.json", "off_policy", ("lla", "4x"))[0]["correct"]
    old["provenance"] = {"merged_from": {"s0.json": {"inputs": {"teacher": {}}}}}
    assert exposure.served_codec(old) is None   # the teacher's


def test_on_minus_off_is_paired_over_the_same_items(tmp_path):
    """200 items; on-policy answers 10 more correctly and never fewer, and answers 10 it left blank:
    paired over the items (joined by id, in any order) the differences are resolved, while Newcombe's
    interval for the same accuracies as independent samples spans 0."""
    from loopkv.stats.intervals import newcombe_difference, paired_proportion_difference

    off_correct = [i % 2 == 0 for i in range(200)]
    on_correct = [c or i in range(1, 21, 2) for i, c in enumerate(off_correct)]
    answered_off = [i % 5 != 0 for i in range(200)]
    answered_on = [a or i < 50 for i, a in enumerate(answered_off)]
    lengths = [3] * 200
    off, on = _samples(off_correct, answered_off, lengths), _samples(on_correct, answered_on, lengths)
    teacher = _samples([True] * 200, [True] * 200, lengths)
    cell = {**_cell(4.0), "off_samples": off[::2] + off[1::2], "on_samples": list(reversed(on))}   # order must not matter
    row = exposure.table_rows([cell], teacher)[0]
    assert row["em_on_minus_off"] == pytest.approx(10 / 200)
    assert row["no_answer_on_minus_off"] == pytest.approx(-10 / 200)   # items 0, 5, ..., 45 now answered
    # the table's interval is the paired one of the items in id order: 10 better in one direction
    want = paired_proportion_difference(on_correct, off_correct)
    assert (row["em_on_minus_off_lo"], row["em_on_minus_off_hi"]) == pytest.approx((want.lo, want.hi))
    assert 0 < row["em_on_minus_off_lo"] and row["no_answer_on_minus_off_hi"] < 0
    independent = newcombe_difference(110, 200, 100, 200)
    assert independent.lo < 0 < independent.hi   # the same numbers, unpaired: inconclusive
    tables.write_all([row], exposure.SPEC, exposure.table_note([row]), "t", tmp_path / "t.pdf", tmp_path / "t.csv",
                     tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))[0]
    assert float(read["em_on_minus_off_lo"]) == pytest.approx(row["em_on_minus_off_lo"])
    assert "paired" in exposure.table_note([row])


def test_on_and_off_alike_on_every_item_leave_on_policy_helps_inconclusive(tmp_path):
    """No item answered differently: the difference is 0 with an interval around it, so 'on-policy
    raises accuracy' is neither reproduced nor contradicted (a bootstrap would give [0, 0], reproduced)."""
    from loopkv.claims import verdict
    from loopkv.claims.claim import evaluate
    from loopkv.claims.evidence import Reports
    from loopkv.claims.registry import CLAIMS

    same = _samples([i % 3 == 0 for i in range(200)], [True] * 200, [3] * 200)
    cell = {**_cell(4.0), "off_samples": same, "on_samples": same}
    rows = exposure.table_rows([cell], _samples([True] * 200, [True] * 200, [3] * 200))
    tables.write_all(rows, exposure.SPEC, exposure.table_note(rows), "t", tmp_path / "t.pdf", tmp_path / "t.csv",
                     tmp_path / "t.tex")
    reports = Reports({"table4": tmp_path / "t.csv"})
    helps = next(c for c in CLAIMS if c.id == "lla-t4-on-policy-helps-4x")
    assert evaluate(helps, reports, "tiny").verdict == verdict.INCONCLUSIVE


def test_figure_11_points_carry_their_interval_and_each_policys_pareto_front(tmp_path):
    """Figure 11: one point per (policy, budget) and the teacher's, accuracy its items' mean with its
    Wilson interval (scipy's, the reference; 4 of 4 right keeps a width a bootstrap would lose); the front
    keeps a point unless another of its policy has fewer bytes and at least its accuracy."""
    from scipy.stats import binomtest

    from loopkv.report import pareto

    teacher = _samples([True] * 4, [True] * 4, [3, 5, 9, 12])
    four, two = _cell(4.0), _cell(2.0)
    four["off"].update(budget="4x", bytes_per_token=128)
    two["off"] = {**two["off"], "budget": "2x", "bytes_per_token": 256}
    two["on_samples"] = _samples([True, False, False, False], [True] * 4, [3, 5, 9, 12])   # .25 at 2x on-policy
    pts = pareto.points([four, two], teacher, 512)
    assert [(p["policy"], p["budget"], p["bytes_per_token"], p["accuracy"]) for p in pts] == [
        ("teacher", "1x", 512, 1.0), ("off", "4x", 128, 0.25), ("on", "4x", 128, 0.75), ("off", "2x", 256, 0.25),
        ("on", "2x", 256, 0.25)]
    for p, right in ((pts[0], 4), (pts[2], 3)):
        ci = binomtest(right, 4).proportion_ci(confidence_level=0.95, method="wilson")
        assert (p["lo"], p["hi"]) == pytest.approx((ci.low, ci.high)) and p["n"] == 4
    assert pts[0]["lo"] < 0.6                                  # not collapsed at 4 of 4
    # off-policy: 2x has more bytes and no more accuracy than 4x, so it is off the front; on-policy likewise
    assert {(p["policy"], p["budget"]): p["pareto"] for p in pts if p["policy"] != "teacher"} == {
        ("off", "4x"): True, ("off", "2x"): False, ("on", "4x"): True, ("on", "2x"): False}
    pareto.plot(pts, tmp_path / "p.pdf", tmp_path / "p.png", 50, "arithmetic")
    first = (tmp_path / "p.pdf").read_bytes()
    pareto.plot(pts, tmp_path / "p.pdf", tmp_path / "p.png", 50, "arithmetic")
    assert first.startswith(b"%PDF") and (tmp_path / "p.pdf").read_bytes() == first
