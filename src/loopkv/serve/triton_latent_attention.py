"""Fused latent-attention decode kernel (Triton): the math of serve/latent_attention.py in one pass.

One program per (batch row, query head, query). It walks the past tokens in tiles of BLOCK_S:
loads the tile's K latents (BLOCK_S, r_k), rebuilds both RoPE halves of K in registers from the
loop's decoder rows and calibration mean (K1 = c U1^T + mu1, K2 = c U2^T + mu2), rotates them to
each key's position (cos/sin from the position and the inverse frequencies), scores them against
the query, updates an online softmax, and accumulates the softmax-weighted V *latents* (r_v wide).
After the last tile the weighted latent is decoded once: out = (acc / l) U_v^T + mu_v. Only latents
are read from the cache; no K or V row of the context is ever written to memory.

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
        q_ptr, ck_ptr, cv_ptr, upk_ptr, muk_ptr, upv_ptr, muv_ptr, pos_ptr, valid_ptr, inv_freq_ptr,
        out_ptr, lse_ptr,
        S, L, HQ, GROUP, GK, GV, HKV, scale,
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
        for start in range(0, S, BLOCK_S):
            offs_s = start + tl.arange(0, BLOCK_S)
            mask_s = offs_s < S
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

        weights = acc / tl.maximum(l_i, 1e-30)                                   # (r_v,)
        # decode the weighted V latent once, both halves of d
        upv_base = upv_ptr + kv * (2 * HALF * RV)
        uv_mask = mask_h[:, None] & mask_rv[None, :]
        for part in tl.static_range(2):
            uv = tl.load(upv_base + (part * HALF + offs_h)[:, None] * RV + offs_rv[None, :], mask=uv_mask,
                         other=0.0).to(tl.float32)
            muv = tl.load(muv_ptr + kv * 2 * HALF + part * HALF + offs_h, mask=mask_h, other=0.0).to(tl.float32)
            out = tl.sum(uv * weights[None, :], axis=1) + muv
            tl.store(out_ptr + (row * L + qi) * (2 * HALF) + part * HALF + offs_h, out, mask=mask_h)
        tl.store(lse_ptr + row * L + qi, m_i + tl.log(l_i))


_KERNEL = None


def triton_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                            rope_theta: float = 10000.0, block_s: int = 32):
    """Same arguments and result as serve.latent_attention.reference_latent_attention."""
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
    up_k, up_v = up_k.to(ck.dtype).contiguous(), up_v.contiguous()   # dot operands share a dtype
    mu_k, mu_v = mu_k.contiguous(), mu_v.contiguous()
    positions = positions.contiguous()
    valid = (key_valid.to(torch.int8).contiguous() if key_valid is not None
             else torch.ones(1, 1, dtype=torch.int8, device=device))
    out = torch.empty(b, hq, length, d, dtype=torch.float32, device=device)
    lse = torch.empty(b, hq, length, dtype=torch.float32, device=device)
    r_k, r_v = up_k.shape[-1], up_v.shape[-1]
    _KERNEL[(b * hq, length)](
        q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid, inv_freq, out, lse,
        ck.shape[1], length, hq, hq // h_kv, ck.shape[2], cv.shape[2], h_kv, 1.0 / math.sqrt(d),
        q.stride(0), q.stride(1), q.stride(2),
        ck.stride(0), ck.stride(1), ck.stride(2),
        cv.stride(0), cv.stride(1), cv.stride(2),
        positions.stride(0), valid.stride(0),
        RK=r_k, RV=r_v, HALF=half, BLOCK_S=max(16, block_s), BLOCK_RK=_pow2(r_k), BLOCK_RV=_pow2(r_v),
        BLOCK_HALF=_pow2(half), HAS_VALID=key_valid is not None,
        DOT_PRECISION="ieee" if ck.dtype == torch.float32 else "tf32",   # exact float32; bf16 ignores it
    )
    return out, lse
