"""Table 1 from method-eval results: every measured value from the inputs, paper values beside."""
import csv

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
    rows = build_rows(CELLS, CURVES, passkey_train_max=126)
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
    assert [r["method"] for r in read] == ["full", "lla", "kv_quant"]
    assert float(read[1]["arith_em"]) == 0.77 and read[0]["kl_two_pass"] == "" and read[1]["n_arith"] == "200"
    assert "bfloat16" in (tmp_path / "t.tex").read_text()
    assert (tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")
    first = (tmp_path / "t.pdf").read_bytes()
    write_pdf(rows, tmp_path / "t.pdf", "test")
    assert (tmp_path / "t.pdf").read_bytes() == first      # byte-identical reruns
