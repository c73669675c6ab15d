"""LLA Figure 10's data: every served cell's capacity at every context, at the paper's sizes on the meta
device, against a hand count of the teacher's cache (2 * T * D * H * d_head bf16 values a token: 768 KiB
at Ouro-1.4B); the figure is drawn from it."""
import pytest
import torch

from loopkv.errors import LoopKVError
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.report import fig_capacity
from loopkv.serve.bench import context_sweep, weights_bytes

OURO_1_4B = dict(vocab_size=49152, hidden_size=2048, num_hidden_layers=24, total_ut_steps=4, num_attention_heads=16,
                 num_key_value_heads=16, head_dim=128, intermediate_size=5632)
METHODS = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"4x": 4.0}, "kv_quant_group": 32, "read_path": "full"}


def test_the_teachers_capacity_at_each_context_is_the_memory_over_its_hand_counted_cache():
    config = OuroConfig(**OURO_1_4B)
    with torch.device("meta"):
        weights = weights_bytes(OuroForCausalLM(config).to(torch.bfloat16))
    budget = 141 * 10**9
    rows = context_sweep("ouro-1.4b", config, ["4x"], METHODS, torch.bfloat16, "meta", [4096, 8192], budget, weights)
    assert [(r["method"], r["budget"], r["context"]) for r in rows] == [
        ("full", "1x", 4096), ("full", "1x", 8192), ("lla", "4x", 4096), ("lla", "4x", 8192), ("melt", "4x", 4096),
        ("melt", "4x", 8192)]
    per_token = 2 * 4 * 24 * 16 * 128 * 2                       # bytes: K and V, T loops, D layers, H heads, bf16
    assert per_token == 768 * 1024
    for row in rows:
        per_row = per_token * row["context"] // (1 if row["method"] == "full" else 4)   # LLA 4x and MELT: a quarter
        assert row["max_batch"] * per_row <= budget - weights < (row["max_batch"] + 1) * per_row, row
        assert row["cache_bytes_at_max"] == row["max_batch"] * per_row
    # twice the context, half the batch (to the floor)
    by = {(r["method"], r["context"]): r["max_batch"] for r in rows}
    assert by["full", 8192] in (by["full", 4096] // 2, by["full", 4096] // 2 - 1)


def test_the_figure_reads_one_line_per_cell_and_refuses_a_repeated_point(tmp_path):
    rows = [{"scale": "s", "method": m, "budget": b, "context": c, "max_batch": n}
            for m, b, c, n in [("full", "1x", 64, 10), ("full", "1x", 32, 20), ("lla", "4x", 32, 80), ("lla", "4x", 64, 0)]]
    assert fig_capacity.series(rows) == {"s": {"full 1x": [(32, 20), (64, 10)], "lla 4x": [(32, 80), (64, 0)]}}
    fig_capacity.plot(rows, tmp_path / "f.pdf", tmp_path / "f.png", 50)
    first = (tmp_path / "f.pdf").read_bytes()
    fig_capacity.plot(rows, tmp_path / "f.pdf", tmp_path / "f.png", 50)
    assert first.startswith(b"%PDF") and (tmp_path / "f.pdf").read_bytes() == first
    with pytest.raises(LoopKVError, match="s full 1x at 32 twice"):
        fig_capacity.series(rows + [rows[1]])
    with pytest.raises(LoopKVError, match="names no context"):
        fig_capacity.plot([], tmp_path / "g.pdf", tmp_path / "g.png", 50)
