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
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

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
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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


def cpu_peak_growth(served: Served, prompt: torch.Tensor, new_tokens: int) -> int | None:
    """Peak resident memory added by one prefill + decode run on CPU (cache, activations, workspace):
    the run happens in a forked child (one thread), whose peak RSS (ru_maxrss) minus its RSS at the
    fork is the answer. Freed heap is handed back to the OS first (malloc_trim), so the child cannot
    reuse the parent's free lists unseen, and blocks of 128 KiB or more are mapped and unmapped one by
    one. None where fork or /proc are unavailable."""
    import ctypes
    import os
    import resource

    if not hasattr(os, "fork") or not os.path.exists("/proc/self/statm"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except OSError:
        libc = None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # child: measure, report through the pipe, exit without running the parent's atexit
        code = 1
        try:
            torch.set_num_threads(1)   # the parent's OpenMP pool does not survive a fork
            if libc is not None:
                # a fixed mmap threshold: glibc's adapts to the largest block freed so far, so the
                # parent's history decided whether a run's mid-sized tensors came from the heap
                # (kept after free: higher peak) or mmap; the same run measured 131 or 192 MiB
                libc.mallopt(-3, 128 * 1024)   # M_MMAP_THRESHOLD
            with open("/proc/self/statm") as f:
                start = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            timed_run(served, prompt, new_tokens)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024    # KiB on Linux
            os.write(write, str(max(0, peak - start)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    return int(text) if status == 0 and text else None


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
        if device.type == "cpu":   # one more run per method, alone in a child process, for its peak memory
            for served in methods:
                peak = cpu_peak_growth(served, prompt, new_tokens)
                for r in runs[served.name]:
                    r["peak_bytes"] = peak
        reference = runs[methods[0].name]
        for served in methods:
            mine = runs[served.name]
            step = statistics.median(r["decode_s_per_step"] for r in mine)
            # one ratio per round (both runs of a round share the machine's state); their spread is the noise
            paired = [ref["decode_s_per_step"] / r["decode_s_per_step"] for ref, r in zip(reference, mine)]
            peaks = [r["peak_bytes"] for r in mine if r["peak_bytes"] is not None]
            rows.append({
                "method": served.name, "batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens,
                "rounds": rounds, "device": device_name(device),
                "prefill_s": statistics.median(r["prefill_s"] for r in mine),
                "decode_ms_per_token": 1000 * step,
                "tokens_per_s": batch / step,
                "throughput_ratio_to_reference": statistics.median(paired),
                "throughput_ratio_range": [min(paired), max(paired)],
                "cache_bytes": mine[-1]["cache_bytes"],
                "peak_bytes": max(peaks) if peaks else None,
            })
    return rows


def device_name(device: torch.device) -> str:
    """What the numbers were measured on, in words (named beside every number in the reports)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import os
    import platform

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"CPU {model}, {torch.get_num_threads()} threads of {os.cpu_count()} cores"
