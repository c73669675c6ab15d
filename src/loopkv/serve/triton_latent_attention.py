"""Fused latent-attention decode kernel (Triton): the math of serve/latent_attention.py in one pass.

One program per (batch row, query head, query, split of the context): a decode step has one query
per head, so at batch 1 the context is split (flash-decoding) to give every multiprocessor work.
A program walks its split's past tokens in tiles of BLOCK_S:
loads the tile's K latents (BLOCK_S, r_k), rebuilds both RoPE halves of K in registers from the
loop's decoder rows and calibration mean (K1 = c U1^T + mu1, K2 = c U2^T + mu2), rotates them to
each key's position (cos/sin from the position and the inverse frequencies), scores them against
the query, updates an online softmax, and accumulates the softmax-weighted V *latents* (r_v wide).
Each split writes its (max, sum, weighted latent); the splits are merged by log-sum-exp and the
merged latent is decoded once: out = (acc / l) U_v^T + mu_v. Only latents are read from the cache;
no K or V row of the context is ever written to memory.

Dimensions are padded to powers of two >= 16 (tl.dot's minimum) with masked loads. Tested against
the torch reference on CPU under TRITON_INTERPRET=1 (set before triton is imported); on a GPU the
same kernel compiles (benchmarks/latent_kernel.py).
"""
from __future__ import annotations

import math

import torch

from loopkv.serve.latent_attention import _check


def _pow2(n: int) -> int:
    return max(16, 1 << (int(n) - 1).bit_length())


try:   # optional: `make setup` installs it; without it only the torch paths exist
    import triton
    import triton.language as tl
except ImportError:   # pragma: no cover - depends on the environment
    triton = None


def _kernel():
    if triton is None:
        raise RuntimeError("the fused latent-attention kernel needs triton (pip install triton)")
    return latent_attention_kernel


if triton is not None:
    @triton.jit
    def latent_attention_kernel(
        q_ptr, ck_ptr, cv_ptr, upk_ptr, muk_ptr, pos_ptr, valid_ptr, inv_freq_ptr,
        acc_ptr, m_ptr, l_ptr,
        S, L, HQ, GROUP, GK, GV, HKV, SPLITS, SPLIT_S, scale,
        stride_qb, stride_qh, stride_ql,
        stride_ckb, stride_cks, stride_ckg,
        stride_cvb, stride_cvs, stride_cvg,
        stride_pb, stride_vb,
        RK: tl.constexpr, RV: tl.constexpr, HALF: tl.constexpr,
        BLOCK_S: tl.constexpr, BLOCK_RK: tl.constexpr, BLOCK_RV: tl.constexpr, BLOCK_HALF: tl.constexpr,
        HAS_VALID: tl.constexpr, DOT_PRECISION: tl.constexpr,
    ):
        row = tl.program_id(0)               # b * HQ + h
        qi = tl.program_id(1)                # query index in L
        split = tl.program_id(2)             # which SPLIT_S keys of the context
        b = row // HQ
        h = row % HQ
        kv = h // GROUP                      # the KV head this query head reads
        gk = kv * GK // HKV                  # its latent group (G = H_kv: its own; G = 1: shared)
        gv = kv * GV // HKV

        offs_h = tl.arange(0, BLOCK_HALF)
        offs_rk = tl.arange(0, BLOCK_RK)
        offs_rv = tl.arange(0, BLOCK_RV)
        mask_h = offs_h < HALF
        mask_rk = offs_rk < RK
        mask_rv = offs_rv < RV

        q_base = q_ptr + b * stride_qb + h * stride_qh + qi * stride_ql
        q1 = tl.load(q_base + offs_h, mask=mask_h, other=0.0).to(tl.float32) * scale
        q2 = tl.load(q_base + HALF + offs_h, mask=mask_h, other=0.0).to(tl.float32) * scale
        inv_freq = tl.load(inv_freq_ptr + offs_h, mask=mask_h, other=0.0)

        # loop t's K decoder rows of this KV head, split into the two RoPE halves: (HALF, r_k)
        upk_base = upk_ptr + kv * (2 * HALF * RK)
        uk_mask = mask_h[:, None] & mask_rk[None, :]
        # dot operands stay in the cache dtype (bf16 on a GPU: tensor cores, float32 accumulation)
        u1 = tl.load(upk_base + offs_h[:, None] * RK + offs_rk[None, :], mask=uk_mask, other=0.0)
        u2 = tl.load(upk_base + (HALF + offs_h)[:, None] * RK + offs_rk[None, :], mask=uk_mask, other=0.0)
        mu1 = tl.load(muk_ptr + kv * 2 * HALF + offs_h, mask=mask_h, other=0.0).to(tl.float32)
        mu2 = tl.load(muk_ptr + kv * 2 * HALF + HALF + offs_h, mask=mask_h, other=0.0).to(tl.float32)

        m_i = -float("inf")
        l_i = 0.0
        acc = tl.zeros([BLOCK_RV], dtype=tl.float32)
        lo = split * SPLIT_S
        hi = tl.minimum(lo + SPLIT_S, S)
        for start in range(lo, hi, BLOCK_S):
            offs_s = start + tl.arange(0, BLOCK_S)
            mask_s = offs_s < hi
            ck = tl.load(ck_ptr + b * stride_ckb + offs_s[:, None] * stride_cks + gk * stride_ckg + offs_rk[None, :],
                         mask=mask_s[:, None] & mask_rk[None, :], other=0.0)
            k1 = tl.dot(ck, tl.trans(u1), input_precision=DOT_PRECISION) + mu1[None, :]   # (BLOCK_S, HALF)
            k2 = tl.dot(ck, tl.trans(u2), input_precision=DOT_PRECISION) + mu2[None, :]
            pos = tl.load(pos_ptr + b * stride_pb + offs_s, mask=mask_s, other=0).to(tl.float32)
            angle = pos[:, None] * inv_freq[None, :]
            cos = tl.cos(angle)
            sin = tl.sin(angle)
            # rotate-half RoPE: [k1, k2] -> [k1 cos - k2 sin, k2 cos + k1 sin]
            score = tl.sum((k1 * cos - k2 * sin) * q1[None, :] + (k2 * cos + k1 * sin) * q2[None, :], axis=1)
            keep = mask_s
            if HAS_VALID:
                keep = keep & (tl.load(valid_ptr + b * stride_vb + offs_s, mask=mask_s, other=0) != 0)
            score = tl.where(keep, score, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(score, axis=0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            p = tl.exp(score - m_safe)
            rescale = tl.exp(m_i - m_safe)
            cv = tl.load(cv_ptr + b * stride_cvb + offs_s[:, None] * stride_cvs + gv * stride_cvg + offs_rv[None, :],
                         mask=mask_s[:, None] & mask_rv[None, :], other=0.0).to(tl.float32)
            l_i = l_i * rescale + tl.sum(p, axis=0)
            acc = acc * rescale + tl.sum(p[:, None] * cv, axis=0)
            m_i = m_new

        part = (row * L + qi) * SPLITS + split
        tl.store(acc_ptr + part * RV + offs_rv, acc, mask=mask_rv)
        tl.store(m_ptr + part, m_i)
        tl.store(l_ptr + part, l_i)


_KERNEL = None


def _split_size(s: int, programs: int, block_s: int, device: torch.device) -> int:
    """Keys per split: enough splits for ~4 programs per multiprocessor (a decode step at batch 1 has
    only heads x queries programs otherwise), but at least 4 tiles per split."""
    if device.type != "cuda":
        return max(s, 1)
    want = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    splits = max(1, min(-(-want // programs), -(-s // (4 * block_s))))
    return -(-s // splits // block_s) * block_s or block_s


def triton_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                            rope_theta: float = 10000.0, block_s: int = 32, split_s: int | None = None):
    """Same arguments and result as serve.latent_attention.reference_latent_attention.
    `split_s`: keys per split of the context (default: sized to the device)."""
    global _KERNEL
    _check(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid)
    if _KERNEL is None:
        _KERNEL = _kernel()
    b, hq, length, d = q.shape
    if d % 2:
        raise ValueError(f"head_dim must be even for RoPE, got {d}")
    h_kv = up_k.shape[0]
    half = d // 2
    device = q.device
    exponents = torch.arange(0, d, 2, dtype=torch.float64, device=device) / d
    inv_freq = (1.0 / rope_theta**exponents).to(torch.float32)
    q = q.contiguous()
    ck, cv = ck.contiguous(), cv.contiguous()
    up_k = up_k.to(ck.dtype).contiguous()   # dot operands share a dtype
    mu_k = mu_k.contiguous()
    positions = positions.contiguous()
    valid = (key_valid.to(torch.int8).contiguous() if key_valid is not None
             else torch.ones(1, 1, dtype=torch.int8, device=device))
    s, r_k, r_v = ck.shape[1], up_k.shape[-1], up_v.shape[-1]
    block_s = max(16, block_s)
    split_s = split_s or _split_size(s, b * hq * length, block_s, device)
    splits = max(1, -(-s // split_s))
    acc = torch.empty(b, hq, length, splits, r_v, dtype=torch.float32, device=device)
    m = torch.empty(b, hq, length, splits, dtype=torch.float32, device=device)
    l = torch.empty(b, hq, length, splits, dtype=torch.float32, device=device)
    _KERNEL[(b * hq, length, splits)](
        q, ck, cv, up_k, mu_k, positions, valid, inv_freq, acc, m, l,
        s, length, hq, hq // h_kv, ck.shape[2], cv.shape[2], h_kv, splits, split_s, 1.0 / math.sqrt(d),
        q.stride(0), q.stride(1), q.stride(2),
        ck.stride(0), ck.stride(1), ck.stride(2),
        cv.stride(0), cv.stride(1), cv.stride(2),
        positions.stride(0), valid.stride(0),
        RK=r_k, RV=r_v, HALF=half, BLOCK_S=block_s, BLOCK_RK=_pow2(r_k), BLOCK_RV=_pow2(r_v),
        BLOCK_HALF=_pow2(half), HAS_VALID=key_valid is not None,
        DOT_PRECISION="ieee" if ck.dtype == torch.float32 else "tf32",   # exact float32; bf16 ignores it
    )
    return _merge_splits(acc, m, l, up_v, mu_v)


def _merge_splits(acc, m, l, up_v, mu_v):
    """Per-split (weighted V latent, max, sum) -> (out, lse): log-sum-exp merge, then the merged
    latent decoded once per query with its KV head's V decoder rows."""
    top = m.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)     # a query with no valid key
    w = torch.exp(m - top)                                               # (B, Hq, L, splits)
    total = (w * l).sum(dim=-1)
    weights = (w[..., None] * acc).sum(dim=-2) / total.clamp(min=1e-30)[..., None]   # (B, Hq, L, r_v)
    group = acc.shape[1] // up_v.shape[0]
    up = up_v.float().repeat_interleave(group, dim=0)                   # (Hq, d, r_v)
    mu = mu_v.float().repeat_interleave(group, dim=0)
    out = torch.einsum("bhlr,hdr->bhld", weights, up) + mu[None, :, None]
    return out, top.squeeze(-1) + torch.log(total)
