"""Positions and attention masks of a forward over new tokens after `past` cached ones, for a
left-padded batch (attention_mask (B, past + n), 0 = pad) or an unpadded one; every family's model
uses them, so that a padded row computes what it computes alone."""
from __future__ import annotations

import torch


def padded_positions(attention_mask, past: int, n: int, device, batch: int) -> torch.Tensor:
    """RoPE positions of the n new tokens; with a padding mask, left pads do not advance positions."""
    if attention_mask is None:
        return torch.arange(past, past + n, device=device).expand(batch, n)
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.clamp(min=0)[:, -n:]


def attention_mask_over_cache(attention_mask, past: int, n: int, device, batch: int) -> torch.Tensor:
    """Boolean (B, 1, n, past+n): causal over cache order, pads masked as keys; None when plain
    causal attention over the new tokens is exact (no past, no padding).

    Every query may see itself, so rows of pad queries are never empty (no NaN); real tokens
    never see pads.
    """
    if attention_mask is None and past == 0:
        return None
    if attention_mask is not None and past == 0 and bool(attention_mask.all()):
        return None
    total = past + n
    q_idx = torch.arange(past, total, device=device)[:, None]
    k_idx = torch.arange(total, device=device)[None, :]
    allowed = (k_idx <= q_idx)[None, None].expand(batch, 1, n, total)
    if attention_mask is not None:
        if attention_mask.shape[-1] != total:
            raise ValueError(f"attention_mask covers {attention_mask.shape[-1]} tokens, expected {total}")
        allowed = allowed & attention_mask.bool()[:, None, None, :]
        allowed = allowed | (k_idx == q_idx)[None, None]
    return allowed
