"""Cache footprint of a served (method, budget): bytes per token from the method's formula and from
the tensors its cache really allocates, at any architecture, with or without weights.

`fill_cache` runs the cache protocol's write half (begin_forward, append at every (loop, layer),
update_outer at every non-looped layer, end_forward) on K/V of the right shapes, so the method's own code decides what it keeps. On the
meta device nothing is allocated but every tensor's size is known: paper-scale footprints (Ouro-1.4B,
Ouro-2.6B) come from the same code path without loading weights.
"""
from __future__ import annotations

import torch

from loopkv.cache import make_cache
from loopkv.cache.base import LoopCache
from loopkv.cache.registry import codec_methods
from loopkv.cache.settings import cache_factory, configured_setting, new_codec

TEACHER = ("full", "1x")


def served_setting(method: str, budget: str, methods_cfg: dict, config) -> dict:
    """The setting of (method, budget); MELT's budget is T x by construction (one row per layer)."""
    if method == "melt":
        return {"method": "melt", "kwargs": {}, "ratio": float(config.total_ut_steps), "budget": budget}
    return configured_setting(methods_cfg, method, budget, config)


def served_cache(setting: dict, config, codec=None, read_path: str | None = None,
                 device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> LoopCache:
    """A fresh cache of `setting`; codec methods without a `codec` get an untrained one of the
    setting's ranks (footprint and speed do not depend on the codec's values)."""
    if setting["method"] == "melt":
        return make_cache("melt", config)
    if setting["method"] in codec_methods() and codec is None:
        codec = new_codec(setting, config).to(device=device, dtype=dtype)
    return cache_factory(setting, config, codec, read_path=read_path)()


@torch.no_grad()
def fill_cache(cache: LoopCache, batch: int, tokens: int, dtype: torch.dtype = torch.float32,
               device: str | torch.device = "cpu", seed: int = 0, random: bool = True) -> LoopCache:
    """One forward's worth of K/V for `batch` rows of `tokens` through the cache protocol (random
    values, or zeros where only sizes matter: no method's storage depends on the values)."""
    device = torch.device(device)
    # drawn where a generator can live (CPU, CUDA), then moved (e.g. the lazy device has none)
    source = device if device.type in ("cpu", "cuda") else torch.device("cpu")
    generator = None if device.type == "meta" else torch.Generator(device=source).manual_seed(seed)
    shape = (batch, cache.num_kv_heads, tokens, cache.head_dim)
    if random:
        draw = lambda *s, dtype, device, generator: torch.randn(  # noqa: E731
            *s, dtype=dtype, device=source if device.type != "meta" else device, generator=generator).to(device)
    else:
        draw = lambda *s, dtype, device, generator: torch.zeros(*s, dtype=dtype, device=device)  # noqa: E731
    positions = (cache.get_seq_length() + torch.arange(tokens, device=device)).expand(batch, tokens)
    cache.begin_forward(positions)
    for loop in range(cache.num_loops):
        for layer in range(cache.num_layers):
            k = draw(shape, dtype=dtype, device=device, generator=generator)
            v = draw(shape, dtype=dtype, device=device, generator=generator)
            cache.append(loop, layer, positions, k, v)
    for layer in range(cache.num_outer_layers):   # kept exact by every method
        k = draw(shape, dtype=dtype, device=device, generator=generator)
        v = draw(shape, dtype=dtype, device=device, generator=generator)
        cache.update_outer(layer, positions, k, v)
    cache.end_forward()
    return cache


def footprint(setting: dict, config, cache_dtype: torch.dtype, compute_dtype: torch.dtype = torch.float32,
              device: str | torch.device = "cpu", read_path: str | None = None, tokens: int = 64) -> dict:
    """Bytes per token of `setting`: the formula at the cache dtype, the formula at the compute dtype,
    and what a cache filled with `tokens` tokens (batch 1) allocates, per token (`tokens` a multiple
    of kv_quant's key group, whose newest keys wait in full precision until the group fills)."""
    cache = fill_cache(served_cache(setting, config, read_path=read_path, device=device, dtype=compute_dtype),
                       1, tokens, compute_dtype, device)
    return {"method": setting["method"], "budget": setting["budget"], "kwargs": setting["kwargs"],
            "ratio": setting["ratio"], "read_path": read_path,
            "bytes_per_token": cache.bytes_per_token(cache_dtype),
            "formula_bytes_per_token_compute_dtype": cache.bytes_per_token(compute_dtype),
            "allocated_bytes_per_token": cache.allocated_bytes() / tokens}
