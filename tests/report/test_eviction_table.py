"""LLA Table 9 (token eviction composed with methods) from eviction-eval and method-eval results: each
evicting cell beside the same cell without eviction, the paired difference over the same items, the
bytes a context holds (hand-counted here), and the paper's values matched by method and ratio."""
import csv
import json

import pytest

from loopkv.errors import LoopKVError
from loopkv.report import eviction_table
from loopkv.report.paper_values import TABLE9


def metrics(method, budget, ratio, em, passkey, kl, granule=None, bits_bytes=None):
    m = {"method": method, "budget": budget, "setting": {"method": method, "kwargs": {}, "ratio": ratio},
         "bytes_per_token": bits_bytes or int(512 / ratio), "teacher_bytes_per_token": 512,
         "cache_dtype": "bfloat16", "compute_dtype": "float32", "read_path": None,
         "fidelity": {"kl": kl, "top1": 1 - kl, "n_tokens": 4064},
         "arithmetic": {"exact_match": em, "n": 4}, "cloze": {"accuracy": 0.5, "n": 4},
         "passkey": {"by_length": {"64": {"accuracy": passkey, "n": 2}, "256": {"accuracy": 0.0, "n": 2}}}}
    if granule is not None:
        m["eviction"] = {"sinks": 4, "window": 24, "granule": granule}
    return m


def samples(correct):
    return {"samples": {"arithmetic": [{"id": f"a{i}", "correct": c} for i, c in enumerate(correct)]}}


EVICTED = [metrics("full", "1x", 1.0, 0.5, 0.0, 0.3, granule=1),
           metrics("kv_quant", "2x", 2.0, 0.25, 0.0, 0.4, granule=32, bits_bytes=280),
           metrics("lla", "4x", 4.0, 0.25, 0.5, 0.5, granule=1)]
PLAIN = [metrics("full", "1x", 1.0, 0.75, 1.0, 0.0), metrics("kv_quant", "2x", 2.0, 0.75, 1.0, 0.01, bits_bytes=280),
         metrics("lla", "4x", 4.0, 1.0, 1.0, 0.02)]
EVICTED_SAMPLES = [samples([1, 1, 0, 0]), samples([1, 0, 0, 0]), samples([0, 1, 0, 0])]
PLAIN_SAMPLES = [samples([1, 1, 1, 0]), samples([1, 1, 1, 0]), samples([1, 1, 1, 1])]


def _rows(context=128):
    return eviction_table.build_rows(EVICTED, PLAIN, EVICTED_SAMPLES, PLAIN_SAMPLES, 126, context)


def test_rows_pair_each_evicting_cell_with_itself_unevicted():
    full, quant, lla = _rows()
    assert [(r["method"], r["budget"]) for r in (full, quant, lla)] == [("full", "1x"), ("kv_quant", "2x"), ("lla", "4x")]
    assert (lla["arith_em"], lla["arith_em_plain"], lla["passkey_in"], lla["passkey_in_plain"]) == (0.25, 1.0, 0.5, 1.0)
    assert (lla["kl_streamed"], lla["kl_plain"]) == (0.5, 0.02)
    # paired over the same items: lla evicting is right on item 1 only, unevicted on all four
    assert lla["arith_em_vs_plain"] == pytest.approx(-0.75) and lla["arith_em_vs_plain_lo"] < -0.75
    assert full["arith_em_vs_plain"] == pytest.approx(-0.25)
    assert full["arith_em_lo"] < 0.5 < full["arith_em_hi"]           # a proportion's own interval
    # the paper's values by method and ratio; eviction alone is not in the paper
    assert (quant["paper_gsm8k"], lla["paper_gsm8k"]) == (TABLE9["kv_quant", 2.0]["gsm8k"], TABLE9["lla", 4.0]["gsm8k"])
    assert full["paper_gsm8k"] is None and full["paper_gsm8k_plain"] is None and lla["paper_gsm8k_plain"] == 0.79


def test_held_tokens_and_bytes_at_the_context_by_hand():
    full, quant, lla = _rows(context=128)
    # sinks 4 + window 24 of 128 tokens: 28 held
    assert (full["held_tokens"], lla["held_tokens"]) == (28, 28)
    assert full["context_ratio"] == pytest.approx(128 / 28) and lla["context_ratio"] == pytest.approx(4 * 128 / 28)
    # kv_quant frees whole groups of 32: group 0 (the sinks) and groups 3 (96..127, the window 104..127) held
    assert quant["held_tokens"] == 64 and quant["context_ratio"] == pytest.approx(512 * 128 / (280 * 64))
    short = _rows(context=20)[0]                                         # nothing evicted below sinks + window
    assert short["held_tokens"] == 20 and short["context_ratio"] == pytest.approx(1.0)


def test_mismatched_cells_are_refused():
    with pytest.raises(LoopKVError, match="same cell without eviction"):
        eviction_table.build_rows(EVICTED, PLAIN[::-1], EVICTED_SAMPLES, PLAIN_SAMPLES, 126, 128)
    with pytest.raises(LoopKVError, match="same cell without eviction"):
        eviction_table.build_rows(PLAIN, PLAIN, EVICTED_SAMPLES, PLAIN_SAMPLES, 126, 128)   # neither evicts
    with pytest.raises(LoopKVError, match="one of each per cell"):
        eviction_table.build_rows(EVICTED, PLAIN[:2], EVICTED_SAMPLES, PLAIN_SAMPLES, 126, 128)


def test_the_command_writes_table_9(tmp_path):
    from loopkv.cli import main

    def write(name, i, cell, sample):
        folder = tmp_path / name / str(i)
        folder.mkdir(parents=True)
        (folder / "quality.json").write_text(json.dumps({"metrics": cell}))
        (folder / "quality_samples.json").write_text(json.dumps(sample))
        return str(folder / "quality.json")

    evicted = [write("evicted", i, c, s) for i, (c, s) in enumerate(zip(EVICTED, EVICTED_SAMPLES))]
    plain = [write("plain", i, c, s) for i, (c, s) in enumerate(zip(PLAIN, PLAIN_SAMPLES))]
    cfg = {"data": {"tasks": {"passkey": {"train_lengths": [64, 126]}}}, "method_eval": {"seq_len": 128}}
    out = {k: tmp_path / f"out.{k}" for k in ("pdf", "csv", "tex")}
    assert main(["table9", "--cfg", json.dumps(cfg), "--evicted", *evicted, "--plain", *plain,
                 "--pdf", str(out["pdf"]), "--csv", str(out["csv"]), "--tex", str(out["tex"])]) == 0
    read = list(csv.DictReader(open(out["csv"])))
    assert [(r["method"], r["held_tokens"], r["paper_gsm8k"]) for r in read] == [
        ("full", "28", ""), ("kv_quant", "64", "0.51"), ("lla", "28", "0.52")]
    assert out["pdf"].read_bytes().startswith(b"%PDF") and "sinks" in out["tex"].read_text()
