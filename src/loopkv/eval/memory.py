"""Memory against generation length (MELT's 32k comparison, scaled down) and cache bytes against T.

Each method decodes in a fresh process (process memory is a high-water mark), greedy, one token at
a time through its own cache, and at each checkpoint length records the bytes its cache holds
(allocated tensors, in the compute dtype), the same count at the configured cache dtype from the
method's formula, and the memory of the device it decodes on: on the CPU the process's resident and
peak resident memory (VmRSS / VmHWM), on a GPU the CUDA allocator's allocated and peak bytes.

A method with read paths decodes through its capacity path (`capacity_read_path`: LLA's and
LLA-2D's `fused` read, latents stored and attended in place, no K/V of the context materialised),
recorded as the curve's `read_path`: the peak is then what serving the smaller cache takes. Their
`latent` path stores the same latents but decodes the whole history's K/V of a (loop, layer) at every
read, a transient that puts its peak near the teacher's (measured: benchmarks/memory_read_path.py).
"""
from __future__ import annotations

import multiprocessing
import time

import torch

from loopkv.utils.device import model_device


MEASURES = {"cpu": "process RSS (VmRSS / VmHWM)", "cuda": "CUDA allocator (memory_allocated / max_memory_allocated)"}


def memory_measure(device: torch.device) -> str:
    """What `device_memory` reads on this device: the host process's memory unless it is a GPU."""
    return MEASURES["cuda" if device.type == "cuda" else "cpu"]


def device_memory(device: torch.device = torch.device("cpu")) -> dict:
    """Bytes in use and their high-water mark where the model computes: the CUDA allocator's on a
    GPU, else this process's resident memory (Linux /proc)."""
    if device.type == "cuda":
        return {"memory_bytes": torch.cuda.memory_allocated(device),
                "peak_memory_bytes": torch.cuda.max_memory_allocated(device)}
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value, _unit = line.split()
                fields[name[:-1]] = int(value) * 1024
    return {"memory_bytes": fields["VmRSS"], "peak_memory_bytes": fields["VmHWM"]}


@torch.no_grad()
def decode_memory_curve(model, cache, prompt: torch.Tensor, lengths: list[int], cache_dtype: torch.dtype) -> list[dict]:
    """Greedy decode past every length in `lengths` (generated tokens); one record per length."""
    model.eval()
    device = model_device(model)
    prompt = prompt.to(device)
    logits = model(prompt, cache=cache).logits[:, -1]
    points, generated, start = [], 0, time.perf_counter()
    for target in sorted(lengths):
        while generated < target:
            logits = model(logits.argmax(-1, keepdim=True), cache=cache).logits[:, -1]
            generated += 1
        tokens = cache.get_seq_length() * prompt.shape[0]
        points.append({"generated": generated, "cached_tokens": tokens,
                       "cache_allocated_bytes": cache.allocated_bytes(),
                       "cache_bytes_at_cache_dtype": cache.bytes_per_token(cache_dtype) * tokens,
                       "seconds": time.perf_counter() - start, **device_memory(device)})
    return points


def capacity_read_path(method: str) -> str | None:
    """The read path the memory probe decodes `method` through: `fused` where its cache class has it
    (latents read in place: the capacity story), else its default (first) read path; None for a method
    without read paths (it reads what it stores)."""
    from loopkv.cache.registry import method_class

    paths = method_class(method).read_paths
    return ("fused" if "fused" in paths else paths[0]) if paths else None


def _probe(job: dict) -> dict:
    """One method's curve, in the child process that `measure` starts. `job["read_path"]`, when given,
    overrides the method's capacity read path (benchmarks comparing the paths)."""
    from loopkv.cache.registry import method_class
    from loopkv.cache.settings import cache_factory, configured_setting, load_codec, read_codec_file
    from loopkv.errors import LoopKVError
    from loopkv.kernels import cpu_kernels
    from loopkv.models.loading import load_teacher
    from loopkv.models.melt_model import load_melt
    from loopkv.utils.device import resolve_device

    torch.set_num_threads(job["threads"])
    device = resolve_device(job.get("device", "cpu"))
    before = device_memory(device)
    # only the model this method decodes with: a second one would inflate the process's memory
    model = (load_melt(job["student"], job["dtype"], device=device) if job["method"] == "melt"
             else load_teacher(job["teacher"], job["dtype"], device))
    setting = configured_setting(job["methods_cfg"], job["method"], job["budget"], model.config)
    codec = None
    if job.get("codec"):
        saved = read_codec_file(job["codec"], setting)
        codec = load_codec(setting, model.config, saved["codec_state"], f"codec {job['codec']}")
        codec = codec.to(device=device, dtype=model.dtype)
    read_path = job.get("read_path") or capacity_read_path(job["method"])
    if read_path is not None and read_path not in method_class(job["method"]).read_paths:
        raise LoopKVError(f"{job['method']} has no read path {read_path!r}")
    cache = cache_factory(setting, model.config, codec, read_path=read_path)()
    if device.type == "cpu":   # the CPU kernels (LLA's fused read, its encode) load with the model: not decode growth
        cpu_kernels.extension()
    if device.type == "cuda":   # the peak from here on: the decode's, over the loaded weights
        torch.cuda.reset_peak_memory_stats(device)
    loaded = device_memory(device)
    prompt = torch.full((job["batch"], job["prompt_len"]), job["prompt_token"], dtype=torch.long)
    cache_dtype = getattr(torch, job["methods_cfg"]["cache_dtype"])
    points = decode_memory_curve(model, cache, prompt, job["lengths"], cache_dtype)
    return {"method": job["method"], "budget": job["budget"], "setting": setting, "read_path": read_path,
            "bytes_per_token": cache.bytes_per_token(cache_dtype), "memory_measure": memory_measure(device),
            "process_at_start": before, "process_after_load": loaded, "points": points}


def measure(jobs: list[dict]) -> list[dict]:
    """Run each job in its own spawned process, one after another (so they do not share a peak)."""
    context = multiprocessing.get_context("spawn")
    results = []
    for job in jobs:
        with context.Pool(1) as pool:
            results.append(pool.apply(_probe, (job,)))
    return results


def bytes_over_loops(teacher, student, methods: list[tuple[str, str, dict]], loops: list[int],
                     cache_dtype: torch.dtype, tokens: int = 8) -> list[dict]:
    """Bytes per token at each T, from the formula and from the tensors a forward of `tokens`
    tokens allocates. methods: (name, budget label, methods config); the same weights run any T
    (codec methods get a fresh codec of their setting at that T: bytes only, no quality)."""
    from loopkv.cache import make_cache
    from loopkv.cache.registry import codec_methods
    from loopkv.cache.settings import cache_factory, configured_setting, new_codec

    rows = []
    ids = torch.randint(3, teacher.config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    ids = ids.to(model_device(teacher))
    for T in loops:
        for name, budget, methods_cfg in methods:
            model = student if name == "melt" else teacher
            own = model.config.total_ut_steps   # set for this forward and restored: the weights serve any T
            model.config.total_ut_steps = T
            try:
                if name in ("full", "melt"):   # their budgets follow from T: 1x and T x
                    setting = {"method": name, "kwargs": {}, "ratio": 1.0 if name == "full" else float(T)}
                    cache = make_cache(name, model.config)
                else:
                    setting = configured_setting(methods_cfg, name, budget, model.config)
                    codec = (new_codec(setting, model.config).to(device=ids.device, dtype=model.dtype)
                             if name in codec_methods() else None)
                    cache = cache_factory(setting, model.config, codec, read_path="latent")()
                with torch.no_grad():
                    model(ids, cache=cache)
            finally:
                model.config.total_ut_steps = own
            rows.append({"loops": T, "method": name, "budget": budget if name != "full" else "1x",
                         "setting": setting, "bytes_per_token": cache.bytes_per_token(cache_dtype),
                         "formula_bytes_per_token_compute_dtype": cache.bytes_per_token(model.dtype),
                         "allocated_bytes_per_token": cache.allocated_bytes() / tokens})
    return rows
