"""Table 1 from method-eval results: every measured value from the inputs, paper values beside."""
import csv

import pytest

from loopkv.report.paper_values import TABLE1
from loopkv.report.table1 import build_rows, write_csv, write_pdf, write_tex


def metrics(method, budget, ratio, kl, em, passkey):
    return {"method": method, "budget": budget, "setting": {"method": method, "kwargs": {}, "ratio": ratio},
            "bytes_per_token": int(8192 / ratio), "teacher_bytes_per_token": 8192, "cache_dtype": "bfloat16", "compute_dtype": "float32",
            "read_path": "latent" if method == "lla" else None,
            "fidelity": {"kl": kl, "top1": 1 - kl, "n_tokens": 4064},
            "arithmetic": {"exact_match": em, "n": 200}, "cloze": {"accuracy": 0.3, "n": 200},
            "passkey": {"by_length": {"64": {"accuracy": passkey, "n": 20}, "126": {"accuracy": 1.0, "n": 20},
                                      "256": {"accuracy": 0.05, "n": 20}}}}


CELLS = [metrics("full", "1x", 1.0, 0.0, 0.79, 1.0), metrics("lla", "4x", 4.0, 0.01, 0.77, 0.9),
         metrics("kv_quant", "5.33x", 5.333333, 0.2, 0.5, 0.5)]
CURVES = {("lla", "4x"): {"curve": {"heldout": [{"step": 0, "kl": 0.02}, {"step": 50, "kl": 0.008}]},
                          "best": {"step": 50, "kl": 0.008}}}


def test_rows_carry_measured_values_and_paper_values_separately():
    rows = build_rows(CELLS, CURVES, passkey_train_max=126)[:3]
    assert [r["method"] for r in rows] == ["full", "lla", "kv_quant"]
    lla = rows[1]
    assert (lla["kl_streamed"], lla["arith_em"], lla["kl_two_pass"], lla["kl_svd_only"]) == (0.01, 0.77, 0.008, 0.02)
    assert lla["passkey_in"] == (0.9 * 20 + 1.0 * 20) / 40 and lla["n_passkey_in"] == 40
    assert lla["passkey_out"] == 0.05 and lla["n_passkey_out"] == 20
    assert lla["paper_kl"] == TABLE1["lla", 4.0]["kl"] and lla["paper_gsm8k"] == TABLE1["lla", 4.0]["gsm8k"]
    assert rows[2]["paper_gsm8k"] == TABLE1["kv_quant", 5.33]["gsm8k"] and rows[2]["trained"] is False
    assert rows[0]["paper_gsm8k"] == TABLE1["full", 1.0]["gsm8k"] and rows[0]["kl_two_pass"] is None
    assert lla["bytes_ratio"] == 4.0 and rows[0]["bytes_ratio"] == 1.0


def test_csv_tex_and_pdf_are_written(tmp_path):
    rows = build_rows(CELLS, CURVES, passkey_train_max=126)
    write_csv(rows, tmp_path / "t.csv")
    write_tex(rows, tmp_path / "t.tex")
    write_pdf(rows, tmp_path / "t.pdf", "test")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert [r["method"] for r in read[:3]] == ["full", "lla", "kv_quant"]
    assert {r["budget"] for r in read[3:]} == {"not run"}
    assert float(read[1]["arith_em"]) == 0.77 and read[0]["kl_two_pass"] == "" and read[1]["n_arith"] == "200"
    assert "bfloat16" in (tmp_path / "t.tex").read_text()
    assert (tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")
    first = (tmp_path / "t.pdf").read_bytes()
    write_pdf(rows, tmp_path / "t.pdf", "test")
    assert (tmp_path / "t.pdf").read_bytes() == first      # byte-identical reruns


def test_every_paper_row_is_shown_and_the_ones_not_run_say_so():
    rows = build_rows(CELLS, CURVES, passkey_train_max=126)
    run = {("full", 1.0), ("lla", 4.0), ("kv_quant", 5.33)}
    not_run = rows[3:]
    # one row per paper entry this run has no cell for, with every paper value the paper gives
    assert sorted((r["method"], r["ratio"]) for r in not_run) == sorted(set(TABLE1) - run)
    for r in not_run:
        assert r["budget"] == "not run" and r.get("arith_em") is None and r.get("kl_streamed") is None
        assert {k: r[f"paper_{k}"] for k in TABLE1[r["method"], r["ratio"]]} == TABLE1[r["method"], r["ratio"]]
    # Table 1's text gives the KLs at 21.33x: LLA-2D's .097 beats per-head LLA's .128
    by = {(r["method"], r["ratio"]): r for r in not_run}
    assert (by["lla2d", 21.33]["paper_kl"], by["lla", 21.33]["paper_kl"]) == (0.097, 0.128)


def test_every_accuracy_carries_its_wilson_interval_and_n(tmp_path):
    from scipy.stats import binomtest   # the reference: scipy's own Wilson interval

    rows = build_rows(CELLS, CURVES, passkey_train_max=126)
    write_csv(rows, tmp_path / "t.csv")
    write_tex(rows, tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    lla = read[1]
    for key, successes, n in [("arith_em", 154, 200), ("cloze_acc", 60, 200), ("passkey_in", 38, 40),
                              ("passkey_out", 1, 20)]:
        ci = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert (float(lla[f"{key}_lo"]), float(lla[f"{key}_hi"])) == pytest.approx((ci.low, ci.high), abs=1e-9), key
    ci = binomtest(154, 200).proportion_ci(method="wilson")
    assert f"0.770 [{ci.low:.2f}, {ci.high:.2f}]" in (tmp_path / "t.tex").read_text()
    assert read[3]["arith_em_lo"] == ""   # a not-run row has no interval


def test_an_accuracy_that_is_not_a_proportion_of_its_n_is_refused(tmp_path):
    bad = [metrics("lla", "4x", 4.0, 0.01, 0.7777, 0.9)]   # 0.7777 of 200 items is no whole count
    from loopkv.errors import LoopKVError

    with pytest.raises(LoopKVError, match="arith_em of lla: 0.7777 is not a proportion of 200 items"):
        write_csv(build_rows(bad, CURVES, passkey_train_max=126), tmp_path / "t.csv")


def _samples(flags):
    return {"samples": {"arithmetic": [{"id": f"arith-{i}", "correct": bool(f)} for i, f in enumerate(flags)]}}


def test_em_minus_the_teacher_is_a_paired_difference_over_the_same_items(tmp_path):
    teacher = [1] * 150 + [0] * 50                    # .75
    lla = [1] * 140 + [0] * 10 + [0] * 50             # loses 10 of the teacher's items: .70
    quant = [0] * 100 + [1] * 50 + [0] * 50           # .25
    rows = build_rows(CELLS, CURVES, passkey_train_max=126,
                      samples=[_samples(teacher), _samples(lla), _samples(quant)])
    assert rows[0].get("arith_em_vs_teacher") is None
    d = rows[1]
    assert d["arith_em_vs_teacher"] == pytest.approx(-0.05)
    # paired: only the 10 items that differ vary, so the interval is narrow. Reference, by hand: per-item
    # differences are -1 on 10 of 200 items, so -.05 +- 1.96 * sqrt(.05 * .95 / 200) = [-.080, -.020]
    assert d["arith_em_vs_teacher_lo"] == pytest.approx(-0.080, abs=0.012)
    assert d["arith_em_vs_teacher_hi"] == pytest.approx(-0.020, abs=0.012)
    assert d["arith_em_vs_teacher_hi"] < 0            # the loss is clear, though Wilson intervals of .70 and .75 overlap
    assert rows[2]["arith_em_vs_teacher"] == pytest.approx(-0.5)
    write_csv(rows, tmp_path / "t.csv")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert float(read[1]["arith_em_vs_teacher_lo"]) == pytest.approx(d["arith_em_vs_teacher_lo"])


def test_samples_of_another_test_set_are_refused():
    from loopkv.errors import LoopKVError

    other = {"samples": {"arithmetic": [{"id": "elsewhere", "correct": True}]}}
    with pytest.raises(LoopKVError, match="items differ from the teacher's"):
        build_rows(CELLS[:2], CURVES, passkey_train_max=126, samples=[_samples([1] * 200), other])
