"""Table 13's kernel benchmark: the absorbed row times decoupled-RoPE LLA's read at the same budget,
and what it times is the read (reconstruct-then-attend by hand on the same random inputs)."""
import math

import torch

from loopkv.serve.kernel_bench import absorbed_inputs, absorbed_read, absorbed_split, kernel_rows


def test_the_absorbed_split_keeps_lla_s_budget():
    assert absorbed_split(128, 96, 160, 0.5) == {"d_rope": 64, "r_k": 72, "r_v": 120}   # 72 + 64 + 120 = 256
    assert absorbed_split(16, 6, 10, 0.25) == {"d_rope": 4, "r_k": 4, "r_v": 8}


def test_the_timed_absorbed_read_is_reconstruct_then_attend():
    split = absorbed_split(16, 6, 10, 0.25)
    a = absorbed_inputs(2, 3, 40, 16, split, torch.float32, "cpu")
    q = torch.randn(2, 3, 1, 16, generator=torch.Generator().manual_seed(0))
    d_rope, r_k = split["d_rope"], split["r_k"]
    keys = torch.cat([a["keys"][..., r_k:], a["keys"][..., :r_k] @ a["up_k"].transpose(1, 2)[None] + a["mu_k"][None, :, None]], -1)
    values = a["values"] @ a["up_v"].transpose(1, 2)[None] + a["mu_v"][None, :, None]
    expected = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(16), -1) @ values   # rope dims first, as it reads q
    out, _ = absorbed_read(q, a)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert d_rope == 4


def test_kernel_rows_time_the_absorbed_read_beside_the_others():
    rows = kernel_rows([64], heads=2, head_dim=16, r_k=6, r_v=10, rounds=1, warmup=0, rope_share=0.25)
    assert [r["impl"] for r in rows] == ["teacher", "reconstruct", "fused", "absorbed"]
    absorbed = rows[-1]
    assert absorbed["latents"] == "4/4/8" and absorbed["ms_per_call"] > 0
    assert absorbed["cache_bytes_read"] == rows[1]["cache_bytes_read"] == 2 * 64 * 16 * 4   # one budget
    assert [r["impl"] for r in kernel_rows([64], 2, 16, 6, 10, rounds=1, warmup=0)] == ["teacher", "reconstruct", "fused"]
