"""The fused CPU pass of latent attention (cpu_latent_attention.cpp): the math of
`latent_attention.torch_latent_attention` in one C++ call per (loop, layer), K rebuilt 16 keys at a
time, V absorbed, a decode step's own token in the same softmax.

Why it exists: at the embedded default a decode step's attention call is a few kilobytes of work,
so its time is per-operation overhead; the tiled torch path spends ~50 aten operations per call
where the teacher spends three (two cats and SDPA). One call brings the latent-store path to the
teacher's operation count.

Built with loopkv's other CPU kernels (kernels/cpu_kernels.py: at first use, cached; LOOPKV_CPU_KERNEL).
"""
from __future__ import annotations

import torch

from loopkv.models.rope import Rotary
from loopkv.kernels.latent_attention import (exact_attention_with_lse, folds_own, merge_partial_attention,
                                             rotated_own)

_NONE, _NO_MASK = torch.empty(0), torch.empty(0, dtype=torch.bool)   # "not given" to the kernel


def cpu_latent_attention(module, q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                         rope_theta: float = 10000.0, rope_tables=None, own=None, own_tables=None, rope_table=None):
    """latent_attention on CPU through the kernel `module` (arguments and result as there). The
    kernel checks shapes and converts dtypes itself, reads RoPE rows by position from `rope_table`
    when given, and folds a decode step's own token (one query, mask None) into its softmax,
    rotating it when `own_tables` are given; other new tokens are merged here."""
    by_position = _NONE
    if rope_table is not None:
        rope_tables, by_position = rope_table, positions
    elif rope_tables is None:
        if positions.shape != ck.shape[:2]:
            raise ValueError(f"positions {tuple(positions.shape)} must be (B, S) of the latents {tuple(ck.shape[:2])}")
        rope_tables = Rotary(q.shape[-1], rope_theta).cos_sin(positions, torch.float32)
    fold = folds_own(q, own)
    own_k, own_v = (own[0], own[1]) if fold else (_NONE, _NONE)
    own_cos, own_sin = own_tables if fold and own_tables is not None else (_NONE, _NONE)
    out, lse = module.latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, *rope_tables,
                                       _NO_MASK if key_valid is None else key_valid, own_k, own_v, own_cos, own_sin,
                                       by_position)
    if fold or own is None:
        return out, lse
    return merge_partial_attention(out, lse, *exact_attention_with_lse(q, *rotated_own(own, own_tables)))
