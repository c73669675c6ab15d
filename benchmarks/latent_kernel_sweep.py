"""Where the fused latent-attention kernel's time goes, on a GPU: its launch settings swept at LLA
Table 13's shapes, each timed as GPU time alone (the call captured in a CUDA graph and replayed, so
Python launch overhead drops out) beside the eager call's wall time, with the teacher's attention
(SDPA over stored bf16 K/V) as the reference.

    python benchmarks/latent_kernel_sweep.py [--contexts 4096 32768 262144] [--out sweep.json]

Axes: block_s (keys per tile), num_warps, fold_query (the query folded into K's decoder: fewer
operations per key, its error against float32 reconstruct-then-attend reported beside), the RoPE
tables (given, as a decode step's cache shares them across its T*D calls, or built in the call), and
r_k (96 pads to 128 in tl.dot: is the padding paid?).
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time

import torch
import torch.nn.functional as F

from loopkv.models.rope import Rotary
from loopkv.serve.kernel_bench import random_inputs
from loopkv.kernels.latent_attention import reference_latent_attention
from loopkv.kernels.triton_latent_attention import triton_latent_attention


def gpu_ms(fn, replays: int = 20) -> float:
    """Median GPU time of one call, from a CUDA graph of it replayed (no Python in the loop)."""
    fn()                                    # compile / warm caches outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def wall_ms(fn, calls: int = 20) -> float:
    """Median wall time of one eager call, synchronised (what a Python decode loop pays)."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[4096, 32768, 262144])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--out")
    args = parser.parse_args()
    heads, d = args.heads, args.head_dim
    rows = []

    def record(**row):
        rows.append(row)
        print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)

    def fused(inputs, reference=None, **settings):
        try:
            call = lambda: triton_latent_attention(*inputs.values(), rope_theta=1e6, **settings)   # noqa: E731
            row = {"gpu_ms": gpu_ms(call), "wall_ms": wall_ms(call, 5)}
            if reference is not None:
                row["max_abs_err"] = (call()[0] - reference).abs().max().item()
            return row
        except Exception as error:   # a setting that does not compile (registers, shared memory)
            return {"error": f"{type(error).__name__}: {str(error)[:200]}"}

    for context in args.contexts:
        lat, keys, values = random_inputs(1, heads, context, d, 96, 160, torch.bfloat16, "cuda")
        tables = Rotary(d, 1e6).cos_sin(lat["positions"], torch.float32)
        sdpa = lambda: F.scaled_dot_product_attention(lat["q"], keys, values)   # noqa: E731
        record(context=context, impl="teacher_sdpa", gpu_ms=gpu_ms(sdpa), wall_ms=wall_ms(sdpa))
        # float32 math on the same bf16 inputs: the fold's rounding shows against it
        reference = reference_latent_attention(*(a.float() if a is not None and a.is_floating_point() else a
                                                 for a in lat.values()), rope_theta=1e6)[0]
        for block_s, warps, fold in itertools.product((32, 64, 128), (4, 8), (False, True)):
            record(context=context, impl="fused", block_s=block_s, num_warps=warps, fold_query=fold, tables="given",
                   r_k=96, **fused(lat, reference, block_s=block_s, num_warps=warps, fold_query=fold,
                                   rope_tables=tables))
        del reference
        record(context=context, impl="fused", block_s=64, num_warps=4, fold_query=False, tables="built", r_k=96,
               **fused(lat))
        for r_k in (64, 128):   # the padding question: 96 runs a 128-wide dot
            other, _, _ = random_inputs(1, heads, context, d, r_k, 160, torch.bfloat16, "cuda")
            record(context=context, impl="fused", block_s=64, num_warps=4, fold_query=False, tables="given", r_k=r_k,
                   **fused(other, rope_tables=tables))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
