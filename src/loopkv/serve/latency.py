"""Latency and throughput of served methods: prefill time, decode ms/token, tokens/s and peak memory
at several batch sizes, every method measured in one process, interleaved, after warm-up.

One run = prefill a (batch, prompt_len) prompt through a fresh cache, then `new_tokens` greedy
decode steps (one token per row per step; no early stop, so every method does the same work).
Rounds visit the methods in a rotating order so drift on a shared machine (frequency, neighbours)
spreads over all of them; ratios to the teacher are taken within a round (paired) and summarised
by their median.
"""
from __future__ import annotations

import logging
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from loopkv.utils.device import synchronize

log = logging.getLogger(__name__)


@dataclass
class Served:
    """A method as served: the model that decodes and a factory of its fresh cache."""
    name: str
    model: torch.nn.Module
    new_cache: Callable[[], object]


def rotating_rounds(items: list, rounds: int, warmup: int):
    """(item, recorded) over warmup + rounds rounds, each round in an order rotated by one, so drift
    on a shared machine spreads over all items; the warm-up rounds are not recorded."""
    for round_ in range(warmup + rounds):
        shift = round_ % len(items)
        for item in items[shift:] + items[:shift]:
            yield item, round_ >= warmup


def _sync(device: torch.device) -> None:
    synchronize(device)


@torch.no_grad()
def timed_run(served: Served, prompt: torch.Tensor, new_tokens: int) -> dict:
    """One prefill + `new_tokens` decode steps; times in seconds, memory in bytes."""
    device = prompt.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    cache = served.new_cache()
    _sync(device)
    start = time.perf_counter()
    token = served.model(prompt, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
    _sync(device)
    prefill = time.perf_counter() - start
    steps = []
    for _ in range(new_tokens):
        start = time.perf_counter()
        token = served.model(token, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
        _sync(device)
        steps.append(time.perf_counter() - start)
    row = {"prefill_s": prefill, "decode_s_per_step": statistics.median(steps),
           "cache_bytes": cache.allocated_bytes()}
    row["peak_bytes"] = (torch.cuda.max_memory_allocated(device) - base) if device.type == "cuda" else None
    return row


def cpu_peak_growth(served: Served, prompt: torch.Tensor, new_tokens: int) -> int:
    """Peak tensor bytes one prefill + decode run on CPU adds to those live at its start (cache,
    activations, workspace): the running sum of the CPU allocator's allocation and free events
    (torch.profiler, profile_memory) at its highest. The CUDA rows' measure (the allocator's peak
    less the start) on CPU, and the same for the same run in any process: a process's peak RSS
    depended on malloc's history and differed across processes for the same run (by up to ~20% here, forked
    children with a fixed mmap threshold included), and counted ~20 MiB of process overhead.
    Buffers a library allocates outside torch (MKL's) are not tensors and not counted."""
    from torch.profiler import ProfilerActivity, profile

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")   # the profiler's start/stop lines on stderr, per call
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recorded:
        timed_run(served, prompt, new_tokens)
    events = sorted((e.start_ns(), e.nbytes()) for e in recorded.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    live = peak = 0
    for _, change in events:
        live += change
        peak = max(peak, live)
    return peak


def interleaved(methods: list[Served], batch_sizes: list[int], prompt_len: int, new_tokens: int,
                rounds: int, warmup: int, vocab_size: int, device: str | torch.device = "cpu",
                seed: int = 0) -> list[dict]:
    """Per (method, batch): medians over `rounds` measured rounds (after `warmup` unrecorded ones)
    and the paired ratio to methods[0] (the reference, the teacher): the median of the rounds'
    ratios, with their lowest and highest."""
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for batch in batch_sizes:
        prompt = torch.randint(3, vocab_size, (batch, prompt_len), generator=generator).to(device)
        runs: dict[str, list[dict]] = {m.name: [] for m in methods}
        for served, recorded in rotating_rounds(methods, rounds, warmup):
            result = timed_run(served, prompt, new_tokens)
            log.info("%s batch %d: prefill %.3fs, decode %.2f ms/step", served.name, batch, result["prefill_s"],
                     1000 * result["decode_s_per_step"])
            if recorded:
                runs[served.name].append(result)
        # CPU: one more run per method, profiled, for its peak memory; CUDA: each run's allocator peak
        cpu_peaks = {s.name: cpu_peak_growth(s, prompt, new_tokens) for s in methods} if device.type == "cpu" else {}
        reference = runs[methods[0].name]
        for served in methods:
            mine = runs[served.name]
            step = statistics.median(r["decode_s_per_step"] for r in mine)
            # one ratio per round (both runs of a round share the machine's state); their spread is the noise
            paired = [ref["decode_s_per_step"] / r["decode_s_per_step"] for ref, r in zip(reference, mine)]
            rows.append({
                "method": served.name, "batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens,
                "rounds": rounds, "device": device_name(device),
                "prefill_s": statistics.median(r["prefill_s"] for r in mine),
                "decode_ms_per_token": 1000 * step,
                "tokens_per_s": batch / step,
                "throughput_ratio_to_reference": statistics.median(paired),
                "throughput_ratio_range": [min(paired), max(paired)],
                "cache_bytes": mine[-1]["cache_bytes"],
                "peak_bytes": cpu_peaks[served.name] if cpu_peaks else max(r["peak_bytes"] for r in mine),
            })
    return rows


def device_name(device: torch.device) -> str:
    """What the numbers were measured on, in words (named beside every number in the reports)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "lazy":
        return "lazy tensors on the CPU (placement check; times are not speeds)"
    import os
    import platform

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"CPU {model}, {torch.get_num_threads()} threads of {os.cpu_count()} cores"
