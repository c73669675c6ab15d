"""LLA Table 8 / Figure 5 (the cold-start rank sweep) from method-eval results: Table 1's measured
columns per ratio with the codec's ranks, Table 8's paper values (not Table 1's) beside, a not-run row
per paper ratio the config leaves out, the paired difference to the teacher, and the figure."""
import csv
import json

import pytest

from loopkv.report import rank_sweep
from loopkv.report.paper_values import TABLE1, TABLE8


def metrics(budget, ratio, kwargs, em, kl):
    return {"method": "full" if budget == "1x" else "lla", "budget": budget,
            "setting": {"method": "lla", "kwargs": kwargs, "ratio": ratio},
            "bytes_per_token": int(512 / ratio), "teacher_bytes_per_token": 512, "cache_dtype": "bfloat16",
            "compute_dtype": "float32", "read_path": None if budget == "1x" else "full",
            "fidelity": {"kl": kl, "top1": 1 - kl, "n_tokens": 4064},
            "arithmetic": {"exact_match": em, "n": 4}, "cloze": {"accuracy": 0.5, "n": 4},
            "passkey": {"by_length": {"64": {"accuracy": 1.0, "n": 2}, "256": {"accuracy": 0.0, "n": 2}}}}


def samples(correct):
    return {"samples": {"arithmetic": [{"id": f"a{i}", "correct": c} for i, c in enumerate(correct)]}}


CELLS = [metrics("1x", 1.0, {}, 0.75, 0.0), metrics("2x", 2.0, {"rank_k": 48, "rank_v": 80}, 0.75, 0.001),
         metrics("4x", 4.0, {"rank_k": 24, "rank_v": 40}, 0.25, 0.01)]
SAMPLES = [samples([1, 1, 1, 0]), samples([1, 1, 0, 1]), samples([1, 0, 0, 0])]
CURVES = {("lla", b): {"curve": {"heldout": [{"step": 0, "kl": kl0, "top1": 0.9}]}, "best": {"step": 50, "kl": kl, "top1": 0.95}}
          for b, kl0, kl in (("2x", 0.004, 0.002), ("4x", 0.03, 0.02))}
NO_BENCH = {"gsm8k": None, "mc_avg": [], "mmlu": None}


def _rows():
    return rank_sweep.build_rows(CELLS, CURVES, 126, SAMPLES, [], NO_BENCH, "Ouro-1.4B")


def test_rows_are_the_cells_measured_values_with_ranks_and_table_8s_paper_values():
    rows = _rows()
    teacher, two, four = rows[:3]
    assert [(r["method"], r["budget"], r["ranks"]) for r in rows[:3]] == [("full", "1x", None), ("lla", "2x", "48/80"),
                                                                         ("lla", "4x", "24/40")]
    assert (four["kl_svd_only"], four["kl_two_pass"], four["arith_em"], four["bytes_ratio"]) == (0.03, 0.02, 0.25, 4.0)
    # Table 8's paper values, not Table 1's (4x: GSM8K .590 there, .800 in Table 1; teacher .820 vs .794)
    assert (four["paper_gsm8k"], four["paper_kl"]) == (TABLE8["lla", 4.0]["gsm8k"], 0.0160) != (TABLE1["lla", 4.0]["gsm8k"], 0.059)
    assert (teacher["paper_gsm8k"], two["paper_gsm8k"], two["paper_kl"]) == (0.820, 0.750, 0.0155)
    # the paired difference to the teacher, over the same items: 4x is right on 1, the teacher on 3 (both on item 0)
    assert four["arith_em_vs_teacher"] == pytest.approx(-0.5) and two["arith_em_vs_teacher"] == pytest.approx(0.0)
    assert four["arith_em_vs_teacher_lo"] < -0.5 < four["arith_em_vs_teacher_hi"]
    not_run = rows[3:]
    assert sorted(r["ratio"] for r in not_run) == [1.33, 2.67, 3.2] and {r["budget"] for r in not_run} == {"not run"}
    assert {r["ratio"]: r["paper_gsm8k"] for r in not_run} == {1.33: 0.795, 2.67: 0.575, 3.2: 0.575}


def test_a_model_without_a_table_8_has_no_paper_column_values_and_no_not_run_rows():
    rows = rank_sweep.build_rows(CELLS, CURVES, 126, SAMPLES, [], NO_BENCH, "Ouro-2.6B")
    assert len(rows) == 3 and all(r.get("paper_gsm8k") is None for r in rows)
    assert "Table 8 is reported on Ouro-1.4B only" in rank_sweep.note(rows, "Ouro-2.6B")


def test_table_and_figure_files(tmp_path):
    from loopkv.report import tables

    rows = _rows()
    spec = rank_sweep.spec(rows)
    assert spec.keys[:4] == ["method", "budget", "ratio", "ranks"] and spec.keys[-2:] == ["paper_gsm8k", "paper_kl"]
    tables.write_all(rows, spec, rank_sweep.note(rows, "Ouro-1.4B"), "t", tmp_path / "t.pdf", tmp_path / "t.csv",
                     tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert [r["ranks"] for r in read[:3]] == ["", "48/80", "24/40"] and read[2]["paper_kl"] == "0.016"
    assert "0.0155" in (tmp_path / "t.tex").read_text()                  # printed as the paper prints it
    rank_sweep.plot(rows, tmp_path / "f.pdf", tmp_path / "f.png", 60, "Ouro-1.4B")
    first = (tmp_path / "f.pdf").read_bytes()
    assert first.startswith(b"%PDF") and (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")
    rank_sweep.plot(rows, tmp_path / "f.pdf", tmp_path / "f.png", 60, "Ouro-1.4B")
    assert (tmp_path / "f.pdf").read_bytes() == first                    # byte-identical reruns


def test_the_command_writes_table_8_and_figure_5(tmp_path):
    from loopkv.cli import main

    paths = {}
    for i, (cell, sample) in enumerate(zip(CELLS, SAMPLES)):
        paths[i] = tmp_path / f"q{i}.json", tmp_path / f"s{i}.json"
        paths[i][0].write_text(json.dumps({"metrics": cell}))
        paths[i][1].write_text(json.dumps(sample))
    curves = []
    for (method, budget), curve in CURVES.items():
        curves.append(tmp_path / f"c{budget}.json")
        curves[-1].write_text(json.dumps({**curve, "setting": {"method": method, "budget": budget}}))
    cfg = {"data": {"tasks": {"passkey": {"train_lengths": [64, 126]}}}, "report": {"paper_model": "Ouro-1.4B", "dpi": 60},
           "methods": {"table1_benchmarks": NO_BENCH}}
    out = {k: tmp_path / f"out.{k.split('-')[-1]}" for k in ("pdf", "csv", "tex")}
    assert main(["table8", "--cfg", json.dumps(cfg), "--cells", *[str(p[0]) for p in paths.values()],
                 "--samples", *[str(p[1]) for p in paths.values()], "--curves", *map(str, curves),
                 "--pdf", str(out["pdf"]), "--csv", str(out["csv"]), "--tex", str(out["tex"]),
                 "--fig-pdf", str(tmp_path / "fig.pdf"), "--fig-png", str(tmp_path / "fig.png")]) == 0
    read = list(csv.DictReader(open(out["csv"])))
    assert [(r["budget"], r["ranks"]) for r in read[:3]] == [("1x", ""), ("2x", "48/80"), ("4x", "24/40")]
    assert (tmp_path / "fig.png").read_bytes().startswith(b"\x89PNG")


def test_its_real_column_is_table_1s_gsm8k_alone_paired_with_the_teacher():
    """methods.table1_benchmarks names GSM8K, MC tasks and MMLU; Table 8 reads GSM8K only (one lm-eval
    task per sweep point), its difference to the teacher paired over the same documents."""
    def result(budget, right):
        method = "full" if budget == "1x" else "lla"
        return {"task": "loopkv_gsm8k", "method": method, "budget": budget, "headline": "exact_match", "n": 4,
                "metrics": {"exact_match": sum(right) / 4},
                "samples": [{"doc_id": i, "exact_match": float(r)} for i, r in enumerate(right)]}

    chosen = {"gsm8k": "gsm8k", "mc_avg": ["arc_easy", "piqa"], "mmlu": "mmlu"}
    results = [result("1x", [1, 1, 1, 0]), result("2x", [1, 1, 1, 1]), result("4x", [1, 0, 0, 0])]
    rows = rank_sweep.build_rows(CELLS, CURVES, 126, SAMPLES, results, chosen, "Ouro-1.4B")
    assert [r["gsm8k"] for r in rows[:3]] == [0.75, 1.0, 0.25]
    assert rows[2]["gsm8k_vs_teacher"] == pytest.approx(-0.5) and rows[1]["gsm8k_vs_teacher"] == pytest.approx(0.25)
    assert all("mc_avg" not in r and "mmlu" not in r for r in rows)
    assert ("gsm8k", "GSM8K EM\nlm-eval") in rank_sweep.spec(rows).columns
