"""Decoupled-RoPE LLA's absorbed read at a model's shapes (LLA Table 13's protocol, random weights):
first checked against reconstruct-then-attend at the benchmark's shape, then timed interleaved in one
run beside the teacher's attention, reconstruct-then-attend and full-RoPE LLA's fused read, all at
one budget (serve/kernel_bench.py: the same rows as the workflow's Table 13).

    python benchmarks/absorbed_attention.py [--contexts 4096 16384] [--heads 16] [--head-dim 128]
        [--r-k 96] [--r-v 160] [--rope-share 0.5] [--device cpu|cuda] [--rounds 20]

Prints median milliseconds per call and the ratios.
"""
from __future__ import annotations

import argparse
import math

import torch

from loopkv.serve.kernel_bench import absorbed_inputs, absorbed_read, absorbed_split, kernel_rows


def check(heads: int, head_dim: int, context: int, split: dict, device) -> float:
    """Largest difference of the absorbed read from reconstruct-then-attend (float32), relative."""
    a = absorbed_inputs(1, heads, context, head_dim, split, torch.float32, device)
    q = torch.randn(1, heads, 1, head_dim, generator=torch.Generator().manual_seed(0)).to(device)
    r_k = split["r_k"]
    content = a["keys"][..., :r_k] @ a["up_k"].transpose(1, 2)[None] + a["mu_k"][None, :, None]
    keys = torch.cat([a["keys"][..., r_k:], content], -1)          # rope dims first, as absorbed_read splits q
    values = a["values"] @ a["up_v"].transpose(1, 2)[None] + a["mu_v"][None, :, None]
    want = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(head_dim), -1) @ values
    return float((absorbed_read(q, a)[0] - want).abs().max() / want.abs().max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--r-k", type=int, default=96)
    ap.add_argument("--r-v", type=int, default=160)
    ap.add_argument("--rope-share", type=float, default=0.5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    split = absorbed_split(args.head_dim, args.r_k, args.r_v, args.rope_share)
    error = check(args.heads, args.head_dim, args.contexts[0], split, device)
    assert error < 1e-4, f"absorbed read differs from reconstruct-then-attend: {error:.2e}"
    print(f"device {device}, {dtype}; H={args.heads} d_head={args.head_dim}: LLA r_k/r_v {args.r_k}/{args.r_v}; "
          f"decoupled r_k/d_rope/r_v {split['r_k']}/{split['d_rope']}/{split['r_v']}; "
          f"absorbed vs reconstruct-then-attend: relative error {error:.1e}")
    rows = kernel_rows(args.contexts, args.heads, args.head_dim, args.r_k, args.r_v, rounds=args.rounds,
                       dtype=dtype, device=device, rope_share=args.rope_share)
    print(f"{'context':>8} {'impl':>12} {'ms/call':>9} {'vs teacher':>11} {'speed-up vs reconstruct':>24}")
    for r in rows:
        print(f"{r['context']:>8} {r['impl']:>12} {r['ms_per_call']:>9.3f} {r['ratio_to_teacher']:>11.2f} "
              f"{r['speedup_vs_reconstruct']:>24.2f}")


if __name__ == "__main__":
    main()
