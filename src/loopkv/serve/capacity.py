"""Capacity: the largest batch of sequences at a context length whose cache fits a memory budget,
found by search over real allocations.

A probe builds the method's cache for `batch` rows of `context` tokens (serve/footprint.py,
chunked so the transient K/V of the fill stays small) and asks whether weights + what the cache
allocated fit the budget. On CPU the budget is configured (bytes); on a GPU the probe allocates on
the device and the budget is the device's free memory (an out-of-memory error means it does not
fit). Transient decode workspace is not counted on CPU (the cache and the weights are).
"""
from __future__ import annotations

import gc
import logging
import time
from typing import Callable

import torch

from loopkv.serve.footprint import fill_cache, served_cache

log = logging.getLogger(__name__)


def max_batch(fits: Callable[[int], bool], limit: int = 1 << 20, guess: int | None = None) -> int:
    """The largest batch b <= limit with fits(b), for a `fits` that is monotone (true up to some b,
    false after); 0 when not even one row fits. The search starts at `guess` (e.g. the formula's
    answer; default 1): fits(guess) and not fits(guess + 1) settles it in two probes, otherwise it
    grows by doubling or shrinks, then bisects. A guess is verified, never trusted."""
    start = min(max(guess or 1, 1), limit)
    if fits(start):
        low, high = start, start + 1
        while high <= limit and fits(high):
            low, high = high, 2 * high
        high = min(high, limit + 1)       # fits(high) is false, or high is past the limit
    else:
        low, high = 0, start              # the answer is below the start
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


def cache_probe(setting: dict, config, context: int, budget_bytes: int | None, weights_bytes: int,
                dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                read_path: str | None = None, chunk: int = 128) -> Callable[[int], bool]:
    """fits(batch): does a cache of `batch` x `context` tokens, plus the weights, fit?
    budget_bytes None on CUDA = the device's memory (allocation failure = does not fit)."""
    # meta tensors cost nothing. On a GPU, 128-token chunks took minutes per probe at 1.4B (each chunk
    # regrows the cache by a copy), while one whole-context fill holds all T loops of a layer's K/V
    # at once (LLA encodes at the last loop): at a 21x budget's batch that alone overflows an H200.
    step = context if str(device) == "meta" else min(context, 1024) if str(device).startswith("cuda") else chunk

    def fits(batch: int) -> bool:
        cache = served_cache(setting, config, read_path=read_path, device=device, dtype=dtype)
        started, answer = time.perf_counter(), False
        try:
            for start in range(0, context, step):
                fill_cache(cache, batch, min(step, context - start), dtype, device, seed=start, random=False)
                if budget_bytes is not None and weights_bytes + cache.allocated_bytes() > budget_bytes:
                    return False
            answer = budget_bytes is None or weights_bytes + cache.allocated_bytes() <= budget_bytes
            return answer
        except torch.OutOfMemoryError:
            return False
        finally:
            log.info("capacity probe %s batch %d x %d tokens: %s (%.1f s)", setting["method"], batch, context,
                     "fits" if answer else "does not fit", time.perf_counter() - started)
            del cache
            # a cache is freed when its last reference goes (tested): only a GPU probe returns its blocks
            # to the device before the next one. A full collection costs ~0.25 s with torch and
            # transformers loaded, more than a CPU or meta probe itself (136 probes in a serve-bench job)
            if str(device).startswith("cuda"):
                gc.collect()
                torch.cuda.empty_cache()
    return fits


def capacity(setting: dict, config, context: int, budget_bytes: int | None, weights_bytes: int,
             dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
             read_path: str | None = None, limit: int = 1 << 16) -> dict:
    """{"max_batch", "cache_bytes_at_max"}: the search's answer and the bytes its cache allocated."""
    fits = cache_probe(setting, config, context, budget_bytes, weights_bytes, dtype, device, read_path)
    guess = None
    if budget_bytes is not None:   # one row's cache, sized on the meta device, predicts the answer
        one = served_cache(setting, config, read_path=read_path, device="meta", dtype=dtype)
        per_row = fill_cache(one, 1, context, dtype, "meta").allocated_bytes()
        guess = max(1, (budget_bytes - weights_bytes) // per_row) if per_row else None
    best = max_batch(fits, limit, guess)
    cache_bytes = 0
    if best:   # sizes of the winning cache, counted on the meta device (nothing allocated)
        cache = served_cache(setting, config, read_path=read_path, device="meta", dtype=dtype)
        cache_bytes = fill_cache(cache, best, context, dtype, "meta").allocated_bytes()
    return {"max_batch": best, "cache_bytes_at_max": cache_bytes, "context": context,
            "budget_bytes": budget_bytes, "weights_bytes": weights_bytes, "device": str(device)}
