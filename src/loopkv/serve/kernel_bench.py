"""Kernel benchmark (LLA Table 13's measurement): one decode query per head attending over a long
context, random weights, three ways measured interleaved in one run:

- teacher:     scaled dot-product attention over stored, rotated K and V (what the teacher reads)
- reconstruct: rebuild every K (rotated) and V from latents, then attend (the capacity path)
- fused:       latent attention read in place (the Triton kernel on CUDA; the C++ kernel on CPU),
               given the keys' RoPE cos/sin tables, which a decode step builds once for its T*D calls
- absorbed:    decoupled-RoPE LLA's read at the same budget (kernels/absorbed_attention.py): the query
               folded into K's decoder, scores and values in latent space (the paper's Table 13 kernel);
               its latents r_k' + d_rope + r_v' = r_k + r_v, d_rope = rope_share of the head

Times are per call = one (loop, layer) for every head of `batch` rows; a decode token makes T*D
such calls. Bytes read from the cache per call are reported beside (teacher 2*d per key and head,
latents r_k + r_v).
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from loopkv.models.rope import Rotary, apply_rope
from loopkv.kernels import cpu_kernels
from loopkv.kernels.absorbed_attention import absorbed_attention, fold_query
from loopkv.kernels.latent_attention import latent_attention, reference_latent_attention
from loopkv.serve.latency import device_name, rotating_rounds
from loopkv.utils.device import synchronize


def random_inputs(batch, heads, context, head_dim, r_k, r_v, dtype, device, seed=0, kv_heads=None,
                  groups=None, queries=1, offset=0, padding=0):
    """Random latent-attention arguments (dict, in reference_latent_attention's order plus key_valid)
    and the teacher's stored (rotated K, V) of the same context. kv_heads < heads: grouped queries;
    groups = 1: one latent shared by the heads (LLA-2D); padding: row i has i * padding left-padded keys."""
    g = torch.Generator().manual_seed(seed)
    kv_heads = kv_heads or heads
    groups = groups or kv_heads

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device=device, dtype=dtype)

    positions = offset + torch.arange(context).expand(batch, context).clone()
    valid = None
    if padding:
        valid = torch.ones(batch, context, dtype=torch.bool)
        for i in range(batch):
            valid[i, :i * padding] = False
            positions[i] = (positions[i] - i * padding).clamp(min=0)
    latents = {"q": rand(batch, heads, queries, head_dim), "ck": rand(batch, context, groups, r_k),
               "cv": rand(batch, context, groups, r_v), "up_k": rand(kv_heads, head_dim, r_k, scale=r_k**-0.5),
               "mu_k": rand(kv_heads, head_dim), "up_v": rand(kv_heads, head_dim, r_v, scale=r_v**-0.5),
               "mu_v": rand(kv_heads, head_dim), "positions": positions.to(device),
               "key_valid": None if valid is None else valid.to(device)}
    # the teacher's stored cache: rotated K and V of every key (what it would have written)
    cos, sin = Rotary(head_dim, 1e6).cos_sin(latents["positions"], dtype)
    keys = apply_rope(rand(batch, kv_heads, context, head_dim), cos, sin)
    return latents, keys, rand(batch, kv_heads, context, head_dim)


def _timed(fn, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def absorbed_split(head_dim: int, r_k: int, r_v: int, rope_share: float) -> dict:
    """Decoupled-RoPE LLA's latents at LLA's budget r_k + r_v: d_rope = rope_share of the head in whole
    pairs, the rest split in LLA's K/V proportion."""
    d_rope = 2 * round(rope_share * head_dim / 2)
    rest = r_k + r_v - d_rope
    rank_k = max(1, round(rest * r_k / (r_k + r_v)))
    return {"d_rope": d_rope, "r_k": rank_k, "r_v": rest - rank_k}


def absorbed_inputs(batch, heads, context, head_dim, split: dict, dtype, device, seed=1) -> dict:
    """Random arguments of the absorbed read: K's decoder rows of the content dims (float32, as the cache
    keeps them), the latents [c_k, rotated k_R] and c_v, V's decoder."""
    g = torch.Generator().manual_seed(seed)
    d_rope, r_k, r_v = split["d_rope"], split["r_k"], split["r_v"]

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device=device, dtype=dtype)

    return {"up_k": rand(heads, head_dim - d_rope, r_k, scale=r_k**-0.5).float(),
            "mu_k": rand(heads, head_dim - d_rope).float(), "keys": rand(batch, heads, context, r_k + d_rope),
            "values": rand(batch, heads, context, r_v), "up_v": rand(heads, head_dim, r_v, scale=r_v**-0.5),
            "mu_v": rand(heads, head_dim), "d_rope": d_rope}


def absorbed_read(q, a: dict):
    """One absorbed read as the cache does it: the query folded into K's decoder, then latent attention."""
    q_c, q_r = q[..., a["d_rope"]:].float(), q[..., :a["d_rope"]].float()
    folded, bias = fold_query(q_c, q_r, a["up_k"], a["mu_k"])
    return absorbed_attention(folded, bias, a["keys"], a["values"], a["up_v"], a["mu_v"], None, q.shape[-1] ** -0.5)


@torch.no_grad()
def kernel_rows(contexts: list[int], heads: int, head_dim: int, r_k: int, r_v: int, batch: int = 1,
                rounds: int = 5, warmup: int = 1, dtype: torch.dtype = torch.float32,
                device: str | torch.device = "cpu", rope_share: float | None = None) -> list[dict]:
    """`rope_share`: time decoupled-RoPE LLA's absorbed read too (None: not)."""
    device = torch.device(device)
    split = absorbed_split(head_dim, r_k, r_v, rope_share) if rope_share is not None else None
    element = torch.tensor([], dtype=dtype).element_size()
    rows = []
    fused_kernel = "triton" if device.type == "cuda" else cpu_kernels.implementation()
    for context in contexts:
        lat, keys, values = random_inputs(batch, heads, context, head_dim, r_k, r_v, dtype, device)
        args = tuple(lat.values())
        # the keys' RoPE tables, as a serving cache builds them: once per forward for all T*D calls
        tables = Rotary(head_dim, 1e6).cos_sin(lat["positions"], torch.float32)
        ways = {"teacher": lambda: F.scaled_dot_product_attention(lat["q"], keys, values),
                "reconstruct": lambda: reference_latent_attention(*args, rope_theta=1e6),
                "fused": lambda: latent_attention(*args, rope_theta=1e6, rope_tables=tables)}
        if split is not None:   # the query's fold into K's decoder is per call, so it is timed with it
            absorbed = absorbed_inputs(batch, heads, context, head_dim, split, dtype, device)
            ways["absorbed"] = lambda: absorbed_read(lat["q"], absorbed)
        names = list(ways)
        times: dict[str, list[float]] = {n: [] for n in names}
        for name, recorded in rotating_rounds(names, rounds, warmup):
            seconds = _timed(ways[name], device)
            if recorded:
                times[name].append(seconds)
        ms = {n: 1000 * statistics.median(t) for n, t in times.items()}
        read = {"teacher": 2 * head_dim, "reconstruct": r_k + r_v, "fused": r_k + r_v, "absorbed": r_k + r_v}
        for name in names:
            ranks = (f"{split['r_k']}/{split['d_rope']}/{split['r_v']}" if name == "absorbed" else
                     "-" if name == "teacher" else f"{r_k}/{r_v}")
            rows.append({"context": context, "impl": name, "ms_per_call": ms[name],
                         "ratio_to_teacher": ms[name] / ms["teacher"],
                         "speedup_vs_reconstruct": ms["reconstruct"] / ms[name],
                         "cache_bytes_read": batch * heads * context * read[name] * element, "latents": ranks,
                         "batch": batch, "heads": heads, "head_dim": head_dim, "r_k": r_k, "r_v": r_v,
                         "dtype": str(dtype).removeprefix("torch."), "rounds": rounds,
                         "device": device_name(device), "fused_kernel": fused_kernel})
        del lat, keys, values, ways
    return rows
