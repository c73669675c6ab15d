"""The fused latent-attention kernel on a GPU (LLA Table 13): first checks the Triton kernel against
reconstruct-then-attend at the benchmark's shapes, then times it against the teacher's attention and
reconstruct-then-attend, interleaved, in bf16, at contexts up to the paper's 262144 tokens.

    python benchmarks/latent_kernel.py [--contexts 4096 32768 262144] [--batch 1] [--out kernel.json]

Needs a CUDA device and triton (CPU: the tests run the kernel under TRITON_INTERPRET=1 instead).
"""
from __future__ import annotations

import argparse
import json

import torch
import triton

from loopkv.serve.kernel_bench import kernel_rows, random_inputs
from loopkv.kernels.latent_attention import exact_attention_with_lse, merge_partial_attention, reference_latent_attention
from loopkv.kernels.triton_latent_attention import triton_latent_attention

# (batch, heads, kv heads, latent groups, queries, context, d, r_k, r_v, first position, left padding per row)
CHECKS = [
    (2, 16, 16, 16, 1, 4096, 128, 96, 160, 0, 0),          # Ouro-1.4B LLA 4x, decode
    (2, 16, 16, 16, 1, 4096, 128, 96, 160, 262000, 700),   # far positions, padding longer than a split
    (4, 8, 2, 2, 3, 1000, 64, 12, 20, 0, 5),               # grouped queries, several queries
    (1, 4, 4, 1, 1, 3000, 64, 120, 200, 0, 0),             # LLA-2D: one latent shared by the heads
    (3, 4, 4, 4, 1, 5, 32, 24, 40, 0, 1),                  # fewer keys than a tile
    (8, 4, 4, 4, 1, 160, 32, 24, 40, 0, 0),                # the embedded default's decode
]


def check(dtype: torch.dtype, tolerance: float, device: str = "cuda") -> None:
    """The kernel against reconstruct-then-attend on the same (rounded) inputs, in float32."""
    for shape in CHECKS:
        b, h, h_kv, groups, queries, s, d, r_k, r_v, offset, padding = shape
        lat, _, _ = random_inputs(b, h, s, d, r_k, r_v, dtype, device, kv_heads=h_kv, groups=groups,
                                  queries=queries, offset=offset, padding=padding)
        args = tuple(lat.values())
        ref, ref_lse = reference_latent_attention(*(a.float() if a is not None and a.is_floating_point() else a
                                                    for a in args), rope_theta=1e6)
        got, lse = triton_latent_attention(*args, rope_theta=1e6)
        err, lse_err = (got - ref).abs().max().item(), (lse - ref_lse).abs().max().item()
        print(f"{str(dtype):15} {str(shape):52} max |out err| {err:.2e}  |lse err| {lse_err:.2e}")
        assert err < tolerance and lse_err < tolerance, shape
        if queries == 1:   # a decode step: the new token's own K/V folded into the split merge
            own_k, own_v = (torch.randn(b, h_kv, 1, d, device=device).to(dtype) for _ in range(2))
            want, want_lse = merge_partial_attention(ref, ref_lse, *exact_attention_with_lse(
                args[0].float(), own_k.float(), own_v.float(), None))
            got, lse = triton_latent_attention(*args, rope_theta=1e6, own=(own_k, own_v, None))
            err, lse_err = (got - want).abs().max().item(), (lse - want_lse).abs().max().item()
            print(f"{'  + own token':15} {'':52} max |out err| {err:.2e}  |lse err| {lse_err:.2e}")
            assert err < tolerance and lse_err < tolerance, (shape, "own")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[4096, 32768, 262144])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--ranks", type=int, nargs=2, default=[96, 160])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run under TRITON_INTERPRET=1 (slow)")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    r_k, r_v = args.ranks
    print(f"torch {torch.__version__}, triton {triton.__version__}")
    check(torch.float32, 1e-3, args.device)        # correctness first
    check(torch.bfloat16, 2e-2, args.device)
    rows = kernel_rows(args.contexts, args.heads, args.head_dim, r_k, r_v, args.batch, args.rounds,
                       dtype=torch.bfloat16, device=args.device)
    print(f"device: {rows[0]['device']}")
    for r in rows:
        print(f"context {r['context']:>7} {r['impl']:12} {r['ms_per_call']:9.4f} ms  x{r['ratio_to_teacher']:.2f} "
              f"teacher  {r['speedup_vs_reconstruct']:.2f}x vs reconstruct  {r['cache_bytes_read'] / 2**20:.1f} MiB read")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
