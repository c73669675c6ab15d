"""MELT tables and the memory figure from result files: measured values from the inputs, paper
values only in paper columns, files written byte-identically."""
import csv

from loopkv.report import melt_tables, tables
from loopkv.report.fig_memory import plot_memory, summary
from loopkv.report.paper_values import MELT_MEMORY, MELT_TABLE3, TABLE1


def metrics(method, budget, ratio, kl, em):
    return {"method": method, "budget": budget, "setting": {"method": method, "kwargs": {}, "ratio": ratio},
            "bytes_per_token": int(8192 / ratio), "teacher_bytes_per_token": 8192, "cache_dtype": "bfloat16",
            "compute_dtype": "float32", "fidelity": {"kl": kl, "top1": 1 - kl, "n_tokens": 100},
            "arithmetic": {"exact_match": em, "n": 40}, "cloze": {"accuracy": 0.3, "n": 40},
            "passkey": {"by_length": {"64": {"accuracy": 1.0, "n": 10}, "256": {"accuracy": 0.0, "n": 10}}}}


RECIPES = {"full": {"gate": "full", "ema_decay": 0.5, "chunk_size": 16, "interpolation": True, "align_stage": True},
           "gate_mean": {"gate": "mean", "ema_decay": 0.5, "chunk_size": 16, "interpolation": True, "align_stage": True}}
CELLS = {"full": metrics("melt", "4x", 4.0, 0.05, 0.6), "gate_mean": metrics("melt", "4x", 4.0, 0.2, 0.3)}
CURVES = {"full": {"best": {"kl": 0.04}}, "gate_mean": {"best": {"kl": 0.15}}}


def test_recipe_rows_are_measured_with_the_papers_gate_values_beside():
    rows = melt_tables.recipe_rows(3, RECIPES, CELLS, CURVES, passkey_train_max=126)
    measured, not_run = rows[:2], rows[2:]
    assert [(r["recipe"], r["arith_em"], r["heldout_kl"]) for r in measured] == [("full", 0.6, 0.04), ("gate_mean", 0.3, 0.15)]
    assert [r["paper_aime24"] for r in measured] == [MELT_TABLE3["full"], MELT_TABLE3["mean"]]
    assert rows[0]["passkey_in"] == 1.0 and rows[0]["passkey_out"] == 0.0 and rows[0]["bytes_ratio"] == 4.0
    # the paper's other gates are shown, marked not run, never dropped
    assert [(r["recipe"], r["gate"], r["paper_aime24"]) for r in not_run] == [
        ("not run", "single", 34.4), ("not run", "last", 33.7), ("not run", "ema", 30.2)]
    assert all("arith_em" not in r for r in not_run)


def test_table4s_one_paper_number_is_an_unnamed_benchmarks_accuracy_and_not_the_full_recipes():
    # MELT Table 4 gives no number for its full recipe (44.8 is Table 3's element-wise gate, AIME24)
    four = melt_tables.recipe_rows(4, {"full": RECIPES["full"]}, CELLS, CURVES, 126)
    assert four[0]["recipe"] == "full" and four[0]["paper_acc"] is None and "paper_aime24" not in four[0]
    assert [(r["recipe"], r["chunk"], r["paper_acc"]) for r in four[1:]] == [("no_chunk", "not run", 0.0)]
    assert "paper_aime24" not in melt_tables.TABLE4.keys and "paper_acc" in melt_tables.TABLE4.keys


def test_versus_rows_put_paper_values_only_on_the_llas_table_rows(tmp_path):
    rows = melt_tables.versus_rows(metrics("full", "1x", 1.0, 0.0, 0.8), CELLS["full"],
                                   [metrics("lla", "4x", 4.0, 0.01, 0.75)], 126)
    assert [r["method"] for r in rows] == ["full", "melt", "lla"]
    assert rows[1]["paper_gsm8k"] is None and rows[2]["paper_gsm8k"] == TABLE1["lla", 4.0]["gsm8k"]
    note = melt_tables.versus_note(rows)
    tables.write_all(rows, melt_tables.VERSUS, note, "t", tmp_path / "v.pdf", tmp_path / "v.csv", tmp_path / "v.tex")
    read = list(csv.DictReader(open(tmp_path / "v.csv")))
    assert [r["arith_em"] for r in read] == ["0.8", "0.6", "0.75"] and read[1]["paper_gsm8k"] == ""
    first = (tmp_path / "v.pdf").read_bytes()
    tables.write_pdf(rows, melt_tables.VERSUS, note, "t", tmp_path / "v.pdf")
    assert (tmp_path / "v.pdf").read_bytes() == first


def curve(method, per_token, budget="4x", read_path=None):
    return {"method": method, "budget": budget, "read_path": read_path, "process_after_load": {"memory_bytes": 100},
            "memory_measure": "process RSS (VmRSS / VmHWM)",
            "points": [{"generated": n, "cached_tokens": n + 8, "cache_bytes_at_cache_dtype": per_token * (n + 8),
                        "peak_memory_bytes": 1000 + n} for n in (16, 32)]}


def test_memory_summary_and_figure(tmp_path):
    memory = {"curves": [curve("full", 64, "1x"), curve("melt", 16), curve("lla", 16)], "batch": 1,
              "cache_dtype": "bfloat16", "compute_dtype": "float32", "device": "cpu",
              "bytes_over_loops": [{"loops": t, "method": m, "bytes_per_token": b, "budget": "4x"}
                                   for t in (2, 4) for m, b in (("full", 32 * t), ("melt", 16), ("lla", 8 * t))]}
    s = summary(memory)
    assert s["melt"]["cache_ratio_to_teacher"] == 4.0 and s["full"]["cache_ratio_to_teacher"] == 1.0
    plot_memory(memory, MELT_MEMORY, tmp_path / "m.pdf", tmp_path / "m.png")
    assert (tmp_path / "m.pdf").read_bytes().startswith(b"%PDF") and (tmp_path / "m.png").stat().st_size > 0


def test_memory_curves_are_labelled_with_the_read_path_they_decoded_through():
    """LLA's curve is its fused read (the capacity path); a codec method without one says so."""
    from loopkv.report.fig_memory import read_note

    memory = {"curves": [curve("full", 64, "1x"), curve("lla", 16, read_path="fused"), curve("mla_head", 16)]}
    s = summary(memory)
    assert (s["full"]["label"], s["full"]["read_path"]) == ("teacher", None)
    assert (s["lla"]["label"], s["lla"]["read_path"]) == ("LLA 4x (fused read)", "fused")
    assert s["mla_head"]["label"].endswith("(no fused read: decodes K/V per read)")
    assert read_note({"method": "melt"}) == ""
