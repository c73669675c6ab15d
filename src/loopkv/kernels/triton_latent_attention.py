"""Fused latent-attention decode kernel (Triton): the math of kernels/latent_attention.py in one pass.

One program per (batch row, query head, query, split of the context): a decode step has one query
per head, so at batch 1 the context is split (flash-decoding) to give every multiprocessor work.
A program walks its split's past tokens in tiles of BLOCK_S:
loads the tile's K latents (BLOCK_S, r_k), rebuilds both RoPE halves of K in registers from the
loop's decoder rows and calibration mean (K1 = c U1^T + mu1, K2 = c U2^T + mu2), rotates them to
each key's position (cos/sin read from the caller's RoPE tables), scores them against
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

from loopkv.models.rope import Rotary
from loopkv.kernels.latent_attention import check_latent_inputs


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
        q_ptr, ck_ptr, cv_ptr, upk_ptr, muk_ptr, cos_ptr, sin_ptr, valid_ptr,
        acc_ptr, m_ptr, l_ptr,
        S, L, HQ, GROUP, GK, GV, HKV, SPLITS, SPLIT_S, scale,
        stride_qb, stride_qh, stride_ql,
        stride_ckb, stride_cks, stride_ckg,
        stride_cvb, stride_cvs, stride_cvg,
        stride_tb, stride_ts, stride_vb,
        RK: tl.constexpr, RV: tl.constexpr, HALF: tl.constexpr,
        BLOCK_S: tl.constexpr, BLOCK_RK: tl.constexpr, BLOCK_RV: tl.constexpr, BLOCK_HALF: tl.constexpr,
        HAS_VALID: tl.constexpr, DOT_PRECISION: tl.constexpr, FOLD_QUERY: tl.constexpr,
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

        # loop t's K decoder rows of this KV head, split into the two RoPE halves: (HALF, r_k)
        upk_base = upk_ptr + kv * (2 * HALF * RK)
        uk_mask = mask_h[:, None] & mask_rk[None, :]
        # dot operands stay in the cache dtype (bf16 on a GPU: tensor cores, float32 accumulation)
        u1 = tl.load(upk_base + offs_h[:, None] * RK + offs_rk[None, :], mask=uk_mask, other=0.0)
        u2 = tl.load(upk_base + (HALF + offs_h)[:, None] * RK + offs_rk[None, :], mask=uk_mask, other=0.0)
        mu1 = tl.load(muk_ptr + kv * 2 * HALF + offs_h, mask=mask_h, other=0.0).to(tl.float32)
        mu2 = tl.load(muk_ptr + kv * 2 * HALF + HALF + offs_h, mask=mask_h, other=0.0).to(tl.float32)
        if FOLD_QUERY:
            # the query folded into the decoder (kernels/latent_attention.py, _query_folded_decoder):
            # score = sum_j cos_j (c w1 + b1)_j + sin_j (c w2 + b2)_j, a third of the elementwise work
            # per key; w rounded to the cache dtype (bf16 on a GPU: like the teacher's own q and K)
            u1f, u2f = u1.to(tl.float32), u2.to(tl.float32)
            w1 = (q1[:, None] * u1f + q2[:, None] * u2f).to(ck_ptr.dtype.element_ty)
            w2 = (q2[:, None] * u1f - q1[:, None] * u2f).to(ck_ptr.dtype.element_ty)
            b1 = q1 * mu1 + q2 * mu2
            b2 = q2 * mu1 - q1 * mu2
        else:
            w1, w2, b1, b2 = u1, u2, mu1, mu2

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
            x1 = tl.dot(ck, tl.trans(w1), input_precision=DOT_PRECISION) + b1[None, :]   # (BLOCK_S, HALF)
            x2 = tl.dot(ck, tl.trans(w2), input_precision=DOT_PRECISION) + b2[None, :]
            # the keys' RoPE angles from the caller's tables: sin/cos per element in here cost more
            # than everything else (measured), and one table serves every head, loop and layer
            table = b * stride_tb + offs_s[:, None] * stride_ts + offs_h[None, :]
            tile_mask = mask_s[:, None] & mask_h[None, :]
            cos = tl.load(cos_ptr + table, mask=tile_mask, other=0.0)
            sin = tl.load(sin_ptr + table, mask=tile_mask, other=0.0)
            if FOLD_QUERY:
                score = tl.sum(x1 * cos + x2 * sin, axis=1)
            else:   # x = K's halves; rotate-half RoPE: [k1, k2] -> [k1 cos - k2 sin, k2 cos + k1 sin]
                score = tl.sum((x1 * cos - x2 * sin) * q1[None, :] + (x2 * cos + x1 * sin) * q2[None, :], axis=1)
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

    @triton.jit
    def merge_splits_kernel(
        acc_ptr, m_ptr, l_ptr, upv_ptr, muv_ptr, q_ptr, ownk_ptr, ownv_ptr, out_ptr, lse_ptr,
        SPLITS, L, HQ, GROUP, D, RV, scale,
        stride_qb, stride_qh, stride_ql, stride_kb, stride_kh, stride_vb, stride_vh,
        BLOCK_SPLITS: tl.constexpr, BLOCK_RV: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DFULL: tl.constexpr,
        HAS_OWN: tl.constexpr,
    ):
        """One program per query: merge its splits by log-sum-exp, decode the merged V latent with its
        KV head's decoder rows, and (decode steps) fold in the query's own exact key and value."""
        part = tl.program_id(0)              # (b * HQ + h) * L + qi
        row = part // L
        b = row // HQ
        h = row % HQ
        kv = h // GROUP
        offs_sp = tl.arange(0, BLOCK_SPLITS)
        offs_rv = tl.arange(0, BLOCK_RV)
        mask_rv = offs_rv < RV
        s_own = -float("inf")                # the own key's score (weight 0 without one)
        if HAS_OWN:
            offs_f = tl.arange(0, BLOCK_DFULL)
            mask_f = offs_f < D
            qv = tl.load(q_ptr + b * stride_qb + h * stride_qh + offs_f, mask=mask_f, other=0.0).to(tl.float32)
            kown = tl.load(ownk_ptr + b * stride_kb + kv * stride_kh + offs_f, mask=mask_f, other=0.0).to(tl.float32)
            s_own = tl.sum(qv * kown, axis=0) * scale
        top = s_own
        for c in range(0, SPLITS, BLOCK_SPLITS):
            m = tl.load(m_ptr + part * SPLITS + c + offs_sp, mask=c + offs_sp < SPLITS, other=-float("inf"))
            top = tl.maximum(top, tl.max(m, axis=0))
        top = tl.where(top == -float("inf"), 0.0, top)      # a query with no valid key at all
        total = 0.0
        weights = tl.zeros([BLOCK_RV], dtype=tl.float32)
        for c in range(0, SPLITS, BLOCK_SPLITS):
            mask_sp = c + offs_sp < SPLITS
            m = tl.load(m_ptr + part * SPLITS + c + offs_sp, mask=mask_sp, other=-float("inf"))
            l = tl.load(l_ptr + part * SPLITS + c + offs_sp, mask=mask_sp, other=0.0)
            acc = tl.load(acc_ptr + (part * SPLITS + c + offs_sp[:, None]) * RV + offs_rv[None, :],
                          mask=mask_sp[:, None] & mask_rv[None, :], other=0.0)
            w = tl.exp(m - top)
            total += tl.sum(w * l, axis=0)
            weights += tl.sum(w[:, None] * acc, axis=0)
        latent_total = total
        w_own = tl.exp(s_own - top)
        total += w_own
        # out = (sum_s p_s c_v,s U_v^T + mu_v * sum_s p_s + p_own v_own) / total
        inv = 1.0 / tl.maximum(total, 1e-30)
        for d0 in range(0, D, BLOCK_D):
            offs_d = d0 + tl.arange(0, BLOCK_D)
            mask_d = offs_d < D
            u = tl.load(upv_ptr + kv * D * RV + offs_d[:, None] * RV + offs_rv[None, :],
                        mask=mask_d[:, None] & mask_rv[None, :], other=0.0).to(tl.float32)
            mu = tl.load(muv_ptr + kv * D + offs_d, mask=mask_d, other=0.0).to(tl.float32)
            val = tl.sum(u * weights[None, :], axis=1) + mu * latent_total
            if HAS_OWN:
                val += w_own * tl.load(ownv_ptr + b * stride_vb + kv * stride_vh + offs_d, mask=mask_d,
                                       other=0.0).to(tl.float32)
            tl.store(out_ptr + part * D + offs_d, val * inv, mask=mask_d)
        tl.store(lse_ptr + part, top + tl.log(total))


_NO_MASK: dict[torch.device, torch.Tensor] = {}


def _split_size(s: int, programs: int, block_s: int, device: torch.device, per_sm: int = 4) -> int:
    """Keys per split: enough splits for `per_sm` programs per multiprocessor (a decode step at batch 1
    has only heads x queries programs otherwise), but at least 4 tiles per split."""
    if device.type != "cuda":
        return max(s, 1)
    want = per_sm * torch.cuda.get_device_properties(device).multi_processor_count
    splits = max(1, min(-(-want // programs), -(-s // (4 * block_s))))
    return -(-s // splits // block_s) * block_s or block_s


def triton_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                            rope_theta: float = 10000.0, rope_tables=None, own=None, block_s: int = 64,
                            split_s: int | None = None, num_warps: int = 4, num_stages: int | None = None,
                            per_sm: int = 4, fold_query: bool = False):
    """Same arguments and result as kernels.latent_attention.reference_latent_attention.
    `rope_tables`: float32 (cos, sin) of `positions`, (B, 1, S, d) as Rotary.cos_sin makes them (a
    cache builds them once per forward for its T*D calls); built here when not given.
    `own`: (keys, values, None) of one new token per query row (a decode step; keys rotated,
    (B, H_kv, 1, d)), attended together with the past: folded into the merge, no separate pass.
    `split_s`: keys per split of the context (default: `per_sm` programs per multiprocessor);
    `block_s`, `num_warps`, `num_stages`: launch tuning (benchmarks/latent_kernel_sweep.py).
    `fold_query`: fold the query into K's decoder (fewer operations per key; in bf16 the folded rows
    are rounded once, like the teacher's bf16 q and K): exact in float32, not yet timed on a GPU."""
    check_latent_inputs(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid)
    kernel = _kernel()
    b, hq, length, d = q.shape
    if d % 2:
        raise ValueError(f"head_dim must be even for RoPE, got {d}")
    if own is not None and (length != 1 or own[2] is not None or own[0].shape != (b, up_k.shape[0], 1, d)):
        raise ValueError("`own` folds one new token per row into the merge: keys (B, H_kv, 1, d), no mask")
    h_kv = up_k.shape[0]
    device = q.device
    q = q.contiguous()
    # any layout with unit stride in r (a cache stores (B, groups, S, r) and passes a transposed view)
    ck, cv = (c if c.stride(-1) == 1 else c.contiguous() for c in (ck, cv))
    up_k = up_k.to(ck.dtype).contiguous()   # dot operands share a dtype
    mu_k = mu_k.contiguous()
    if rope_tables is None:
        rope_tables = Rotary(d, rope_theta).cos_sin(positions, torch.float32)
    cos, sin = (t.float() for t in rope_tables)
    if cos.shape != (b, 1, ck.shape[1], d) or cos.stride(-1) != 1 or sin.stride() != cos.stride():
        raise ValueError(f"rope_tables must be (B, 1, S, d) = {(b, 1, ck.shape[1], d)} with unit stride in d")
    if key_valid is not None:
        valid = key_valid.to(torch.int8).contiguous()
    else:
        valid = _NO_MASK.get(device)
        if valid is None:
            valid = _NO_MASK[device] = torch.ones(1, 1, dtype=torch.int8, device=device)
    s, r_k, r_v = ck.shape[1], up_k.shape[-1], up_v.shape[-1]
    block_s = max(16, block_s)
    split_s = split_s or _split_size(s, b * hq * length, block_s, device, per_sm)
    splits = max(1, -(-s // split_s))
    acc = torch.empty(b, hq, length, splits, r_v, dtype=torch.float32, device=device)
    m = torch.empty(b, hq, length, splits, dtype=torch.float32, device=device)
    l = torch.empty(b, hq, length, splits, dtype=torch.float32, device=device)
    tuning = {"num_warps": num_warps, **({"num_stages": num_stages} if num_stages else {})}
    kernel[(b * hq, length, splits)](
        q, ck, cv, up_k, mu_k, cos, sin, valid, acc, m, l,
        s, length, hq, hq // h_kv, ck.shape[2], cv.shape[2], h_kv, splits, split_s, 1.0 / math.sqrt(d),
        q.stride(0), q.stride(1), q.stride(2),
        ck.stride(0), ck.stride(1), ck.stride(2),
        cv.stride(0), cv.stride(1), cv.stride(2),
        cos.stride(0), cos.stride(2), valid.stride(0),
        RK=r_k, RV=r_v, HALF=d // 2, BLOCK_S=block_s, BLOCK_RK=_pow2(r_k), BLOCK_RV=_pow2(r_v),
        BLOCK_HALF=_pow2(d // 2), HAS_VALID=key_valid is not None,
        DOT_PRECISION="ieee" if ck.dtype == torch.float32 else "tf32",   # exact float32; bf16 ignores it
        FOLD_QUERY=fold_query, **tuning,
    )
    out = torch.empty(b, hq, length, d, dtype=torch.float32, device=device)
    lse = torch.empty(b, hq, length, dtype=torch.float32, device=device)
    own_k, own_v = (own[0], own[1]) if own is not None else (q, q)     # unused pointers without `own`
    merge_splits_kernel[(b * hq * length,)](
        acc, m, l, up_v.contiguous(), mu_v.contiguous(), q, own_k, own_v, out, lse,
        splits, length, hq, hq // h_kv, d, r_v, 1.0 / math.sqrt(d),
        q.stride(0), q.stride(1), q.stride(2), own_k.stride(0), own_k.stride(1), own_v.stride(0), own_v.stride(1),
        BLOCK_SPLITS=16, BLOCK_RV=_pow2(r_v), BLOCK_D=min(32, _pow2(d)), BLOCK_DFULL=_pow2(d),
        HAS_OWN=own is not None,
    )
    return out, lse
