"""Attention of new queries over past tokens stored only as latents (LLA's capacity path), one
(loop, layer) at a time, in three implementations of the same math:

    K_s = R(p_s) (c_k,s U_k^T + mu_k)      per past token s: decode loop t's rows, rotate to p_s
    a   = softmax_s(q . K_s / sqrt(d))     over the valid past tokens
    out = sum_s a_s (c_v,s U_v^T + mu_v) = (sum_s a_s c_v,s) U_v^T + mu_v

RoPE depends on each key's position, so U_k cannot be folded into q: K is rebuilt from its latent
(per tile, never for the whole context). V has no RoPE, so it is absorbed: the weights are summed
over latents and decoded once per query (exact, since the weights sum to 1).

- `reference_latent_attention`: reconstruct every K and V, then attend (the definition).
- `torch_latent_attention`: tiles of past tokens with an online softmax, K rebuilt per tile, V
  absorbed (the CPU serving path; transient memory O(tile), not O(context)); one query per KV head
  (a decode step without GQA) folds the query into K's decoder instead of rebuilding K.
- `loopkv.kernels.triton_latent_attention`: the same loop as one fused kernel (CUDA).
- `loopkv.kernels.cpu_latent_attention`: the same loop as one fused C++ call (CPU).

Shapes: q (B, Hq, L, d) with RoPE applied; latents ck (B, S, Gk, r_k), cv (B, S, Gv, r_v) where a
latent group serves one KV head (G = H_kv, LLA) or all of them (G = 1, LLA-2D); up_k (H_kv, d, r_k)
and mu_k (H_kv, d) are loop t's rows of the decoder (same for V); positions (B, S) the past tokens'
RoPE positions; key_valid (B, S) bool or None. Query heads are grouped over KV heads (Hq % H_kv == 0).
Every function returns (out (B, Hq, L, d) float32, lse (B, Hq, L) float32): lse lets a caller merge
the past with the new tokens' own exact K/V (`merge_partial_attention`).
"""
from __future__ import annotations

import math

import torch

from loopkv.models.rope import Rotary, apply_rope


def check_latent_inputs(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid) -> None:
    """ValueError unless the arguments have the shapes above (every implementation checks them alike)."""
    b, hq, _, d = q.shape
    h_kv = up_k.shape[0]
    if hq % h_kv or up_v.shape[0] != h_kv:
        raise ValueError(f"query heads {hq} must group over the decoder's KV heads {h_kv} (V: {up_v.shape[0]})")
    if up_k.shape[1] != d or up_v.shape[1] != d or mu_k.shape != (h_kv, d) or mu_v.shape != (h_kv, d):
        raise ValueError(f"decoder rows must be (H_kv, {d}, r); got up_k {tuple(up_k.shape)}, mu_k {tuple(mu_k.shape)}")
    for name, c, up in (("ck", ck, up_k), ("cv", cv, up_v)):
        if c.shape[0] != b or c.shape[-1] != up.shape[-1] or h_kv % c.shape[2]:
            raise ValueError(f"{name} {tuple(c.shape)} does not fit batch {b} / decoder {tuple(up.shape)}")
    if positions.shape != ck.shape[:2] or cv.shape[:2] != ck.shape[:2]:
        raise ValueError(f"positions {tuple(positions.shape)} must be (B, S) of the latents {tuple(ck.shape[:2])}")
    if key_valid is not None and key_valid.shape != ck.shape[:2]:
        raise ValueError(f"key_valid {tuple(key_valid.shape)} must be (B, S) = {tuple(ck.shape[:2])}")


def _per_head(c: torch.Tensor, h_kv: int) -> torch.Tensor:
    """Latents (B, S, G, r) -> (B, H_kv, S, r): G = H_kv is one latent per head, G = 1 shared."""
    c = c.transpose(1, 2).float()
    return c.expand(-1, h_kv, -1, -1) if c.shape[1] == 1 else c


def _decode(c: torch.Tensor, up: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """(B, H_kv, S, r) latents -> (B, H_kv, S, d) rows of one loop."""
    return torch.matmul(c, up.float().transpose(-1, -2)) + mu.float()[None, :, None]


def _grouped(x: torch.Tensor, hq: int) -> torch.Tensor:
    """(B, H_kv, ...) -> (B, Hq, ...): each KV head serves Hq / H_kv query heads."""
    return x.repeat_interleave(hq // x.shape[1], dim=1)


def reference_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                               rope_theta: float = 10000.0):
    """Reconstruct every past K (rotated) and V, then attend: the definition the others must equal."""
    check_latent_inputs(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid)
    hq, d, h_kv = q.shape[1], q.shape[-1], up_k.shape[0]
    cos, sin = Rotary(d, rope_theta).cos_sin(positions, torch.float32)
    keys = _grouped(apply_rope(_decode(_per_head(ck, h_kv), up_k, mu_k), cos, sin), hq)
    values = _grouped(_decode(_per_head(cv, h_kv), up_v, mu_v), hq)
    scores = q.float() @ keys.transpose(-1, -2) / math.sqrt(d)                   # (B, Hq, L, S)
    if key_valid is not None:
        scores = scores.masked_fill(~key_valid[:, None, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.softmax(scores, dim=-1) @ values, lse


def torch_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                           rope_theta: float = 10000.0, tile: int = 1024, rope_tables=None, own=None):
    """Tiles of `tile` past tokens, online softmax, K rebuilt per tile, V absorbed into latents.
    `rope_tables`: (cos, sin) of `positions` (B, 1, S, d) when the caller already has them (a cache
    reuses them across the T*D calls of a forward). `own`: as in latent_attention.
    A past that fits one tile (a decode step at short context) takes one pass without the online
    bookkeeping, the new tokens' keys joining the same softmax: on a CPU the time of a small decode
    step is mostly per-operation overhead, so fewer operations is what makes it faster."""
    check_latent_inputs(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid)
    b, hq, length, d = q.shape
    h_kv, group = up_k.shape[0], hq // up_k.shape[0]
    rotary = Rotary(d, rope_theta)
    # queries grouped under their KV head: (B, H_kv, group * L, d), so one rebuilt K tile serves them all
    qg = q.float().reshape(b, h_kv, group * length, d) / math.sqrt(d)

    folded = _query_folded_decoder(qg, up_k, mu_k) if group * length == 1 else None

    def tile_scores(start, end):
        if rope_tables is None:
            cos, sin = rotary.cos_sin(positions[:, start:end], torch.float32)
        else:
            cos, sin = (t[:, :, start:end].float() for t in rope_tables)
        c = _per_head(ck[:, start:end], h_kv)
        if folded is not None:   # one query per KV head: no K rebuilt, no rotation pass (see below)
            half = d // 2
            cos_sin = torch.cat([cos[..., :half], sin[..., :half]], dim=-1)        # (B, 1, tile, d)
            terms = torch.matmul(c, folded[0].transpose(-1, -2)) + folded[1]      # (B, H_kv, tile, d)
            scores = (terms * cos_sin).sum(-1)[:, :, None]                         # (B, H_kv, 1, tile)
        else:
            keys = apply_rope(_decode(c, up_k, mu_k), cos, sin)
            scores = qg @ keys.transpose(-1, -2)                                  # (B, H_kv, gL, tile)
        if key_valid is not None:
            scores = scores.masked_fill(~key_valid[:, None, None, start:end], float("-inf"))
        return scores

    def decoded(weights):   # (B, H_kv, gL, r_v) softmax-weighted latents -> (B, Hq, L, d), mu_v not added
        return torch.einsum("bhqr,hdr->bhqd", weights, up_v.float()).reshape(b, hq, length, d)

    s = ck.shape[1]
    if s <= tile:
        scores = tile_scores(0, s)
        if own is not None:
            scores = torch.cat([scores, _own_scores(qg, own, group)], dim=-1)
        top = scores.amax(dim=-1, keepdim=True)
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)           # rows with no valid key
        p = torch.exp(scores - top)
        total = p.sum(dim=-1, keepdim=True)
        past = p[..., :s]
        out = decoded(past @ _per_head(cv, h_kv)) + _grouped(mu_v.float()[None, :, None], hq).mul(
            past.sum(-1).reshape(b, hq, length, 1))
        if own is not None:
            out = out + (p[..., s:] @ own[1].float()).reshape(b, hq, length, d)
        out = out / total.clamp(min=1e-30).reshape(b, hq, length, 1)
        return out, (top + torch.log(total)).reshape(b, hq, length)
    m = torch.full((b, h_kv, group * length), float("-inf"), device=q.device)
    l = torch.zeros(b, h_kv, group * length, device=q.device)
    acc = torch.zeros(b, h_kv, group * length, cv.shape[-1], device=q.device)
    for start in range(0, s, tile):
        end = min(start + tile, s)
        scores = tile_scores(start, end)
        m_new = torch.maximum(m, scores.amax(dim=-1))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)   # rows with no valid key yet
        p = torch.exp(scores - safe[..., None])
        rescale = torch.exp(m - safe)
        l = l * rescale + p.sum(dim=-1)
        acc = acc * rescale[..., None] + p @ _per_head(cv[:, start:end], h_kv)
        m = m_new
    out = decoded(acc / l.clamp(min=1e-30)[..., None]) + _grouped(mu_v.float()[None, :, None], hq)
    return _with_own(q, (out, (m + torch.log(l)).reshape(b, hq, length)), own)


def folds_own(q, own) -> bool:
    """Whether a fused kernel takes the new tokens into its own softmax: a decode step's one token."""
    return own is not None and q.shape[2] == 1 and own[2] is None


def _with_own(q, read, own):
    """(out, lse) over past latents -> over past and the new tokens `own` (None: unchanged)."""
    return read if own is None else merge_partial_attention(*read, *exact_attention_with_lse(q, *own))


def _query_folded_decoder(qg, up_k, mu_k):
    """One query per KV head: fold the query into K's decoder. With rotate-half RoPE and K = U c + mu,
    q . R(p) K = sum_j cos_j (q1 k1 + q2 k2)_j + sin_j (q2 k1 - q1 k2)_j, and each bracket is linear
    in c: (weights (B, H_kv, d, r), bias (B, H_kv, 1, d)) give a key's d terms as c W^T + bias, to be
    dotted with [cos, sin] at its position. Same multiply-adds as rebuilding K, without its
    rotation and scoring passes over (B, H, S, d)."""
    half = qg.shape[-1] // 2
    q1, q2 = qg[..., :half].transpose(-1, -2), qg[..., half:].transpose(-1, -2)   # (B, H_kv, half, 1)
    u1, u2 = up_k.float()[:, :half], up_k.float()[:, half:]                        # (H_kv, half, r)
    m1, m2 = mu_k.float()[:, :half, None], mu_k.float()[:, half:, None]           # (H_kv, half, 1)
    weights = torch.cat([q1 * u1 + q2 * u2, q2 * u1 - q1 * u2], dim=-2)
    bias = torch.cat([q1 * m1 + q2 * m2, q2 * m1 - q1 * m2], dim=-2).transpose(-1, -2)
    return weights, bias


def _own_scores(qg, own, group):
    """Scores of the grouped queries (B, H_kv, group * L, d), already scaled, against the new tokens'
    own keys (B, H_kv, L, d), masked by own's (B, 1, L, L) mask (None: causal)."""
    keys, _, mask = own
    length = keys.shape[2]
    scores = qg @ keys.float().transpose(-1, -2)                                  # (B, H_kv, gL, L)
    if mask is None and length == 1:                                              # a decode step sees itself
        return scores
    if mask is None:
        mask = torch.ones(length, length, dtype=torch.bool, device=qg.device).tril()
    return scores.masked_fill(~mask.repeat(1, 1, group, 1) if mask.dim() == 4 else ~mask.repeat(group, 1),
                              float("-inf"))


def merge_partial_attention(out_a, lse_a, out_b, lse_b):
    """Attention over the union of two disjoint key sets from each set's (out, lse)."""
    lse = torch.logaddexp(lse_a, lse_b)
    wa = torch.exp(lse_a - lse).nan_to_num(0.0)[..., None]       # a set with no valid key weighs 0
    wb = torch.exp(lse_b - lse).nan_to_num(0.0)[..., None]
    return out_a.nan_to_num(0.0) * wa + out_b.nan_to_num(0.0) * wb, lse


def exact_attention_with_lse(q, keys, values, mask):
    """Attention over explicit (post-RoPE) K/V with its lse; mask (B, 1, L, S) bool or None = causal.
    Computed in float32, or in q's dtype where that is wider (float64 tests)."""
    hq, dtype = q.shape[1], torch.promote_types(q.dtype, torch.float32)
    if keys.shape[2] == 1 and q.shape[2] == 1 and mask is None:    # a decode step's own key: weight 1
        keys, values = _grouped(keys.to(dtype), hq), _grouped(values.to(dtype), hq)
        return values, (q.to(dtype) * keys).sum(-1) / math.sqrt(q.shape[-1])
    keys, values = _grouped(keys.to(dtype), hq), _grouped(values.to(dtype), hq)
    scores = q.to(dtype) @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is None:
        length, s = scores.shape[-2:]
        mask = torch.ones(length, s, dtype=torch.bool, device=q.device).tril(s - length)
    scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ values, lse


def rotated_own(own, own_tables):
    """own = (keys, values, mask) with its keys rotated: by `own_tables` (cos, sin) when given (the
    keys are then pre-RoPE), unchanged otherwise."""
    return own if own is None or own_tables is None else (apply_rope(own[0], *own_tables), *own[1:])


def latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None, rope_theta: float = 10000.0,
                     rope_tables=None, own=None, own_tables=None, rope_table=None, cpu_module=None):
    """The serving path: the fused Triton kernel on CUDA tensors (when triton is installed), the
    fused C++ kernel on CPU tensors (kernels/cpu_latent_attention.py; LOOPKV_CPU_KERNEL), the
    tiled torch path otherwise. Same arguments and result as reference_latent_attention, except that
    `own` = (keys, values, mask) of the new tokens (keys rotated, (B, H_kv, L, d); mask (B, 1, L, L)
    or None = causal) joins the past: the result is attention over past latents and new tokens.
    `own_tables`: (cos, sin) (B, 1, L, d) of the new tokens' positions; when given, own's keys are
    pre-RoPE and are rotated here (inside the CPU kernel when it folds them: a decode step's rotation
    as separate operations cost as much as the kernel call). `rope_table`: (cos, sin) (P, d), RoPE
    rows indexed by position (P above every position), instead of `rope_tables`; the CPU kernel reads
    it directly, the other paths gather their tables from it. A decode step's own token (L = 1, mask
    None) is folded into the kernel's merge on CUDA and CPU. `cpu_module`: the CPU kernels when the
    caller already resolved them (a cache does, once per forward); otherwise they are looked up here."""
    if q.device.type == "cpu":
        from loopkv.kernels import cpu_kernels, cpu_latent_attention as cpu

        module = cpu_module if cpu_module is not None else cpu_kernels.extension()
        if module is not None:
            return cpu.cpu_latent_attention(module, q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid,
                                            rope_theta, rope_tables, own, own_tables, rope_table)
    if rope_table is not None:
        rope_tables = tuple(t[positions].unsqueeze(1) for t in rope_table)
    own = rotated_own(own, own_tables)
    if q.is_cuda:
        from loopkv.kernels import triton_latent_attention as fused

        if fused.triton is not None:
            fold = folds_own(q, own)
            read = fused.triton_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid,
                                                 rope_theta, rope_tables, own=own if fold else None)
            return read if fold else _with_own(q, read, own)
    return torch_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid, rope_theta,
                                  rope_tables=rope_tables, own=own)
