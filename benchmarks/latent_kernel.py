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

from loopkv.serve.kernel_bench import _inputs, kernel_rows
from loopkv.serve.latent_attention import reference_latent_attention
from loopkv.serve.triton_latent_attention import triton_latent_attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[4096, 32768, 262144])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--ranks", type=int, nargs=2, default=[96, 160])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    r_k, r_v = args.ranks
    for dtype, tol in ((torch.float32, 1e-3), (torch.bfloat16, 3e-2)):     # correctness first
        lat, _, _ = _inputs(2, args.heads, 4096, args.head_dim, r_k, r_v, dtype, "cuda")
        a = (lat["q"], lat["ck"], lat["cv"], lat["up_k"], lat["mu_k"], lat["up_v"], lat["mu_v"], lat["positions"])
        ref, _ = reference_latent_attention(*a, rope_theta=1e6)
        got, _ = triton_latent_attention(*a, rope_theta=1e6)
        err = (got - ref).abs().max().item()
        print(f"{dtype}: max |triton - reference| = {err:.2e} (tolerance {tol})")
        assert err < tol
    rows = kernel_rows(args.contexts, args.heads, args.head_dim, r_k, r_v, args.batch, args.rounds,
                       dtype=torch.bfloat16, device="cuda")
    print(f"device: {rows[0]['device']}")
    for r in rows:
        print(f"context {r['context']:>7} {r['impl']:12} {r['ms_per_call']:9.4f} ms  x{r['ratio_to_teacher']:.2f} "
              f"teacher  {r['speedup_vs_reconstruct']:.2f}x vs reconstruct  {r['cache_bytes_read'] / 2**20:.1f} MiB read")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
