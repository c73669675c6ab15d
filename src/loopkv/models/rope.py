"""Rotary position embedding, non-interleaved (rotate-half) form, as Ouro uses it."""
from __future__ import annotations

import torch


class Rotary:
    """cos/sin tables for given positions; no parameters, so caches and the model can each hold one."""

    def __init__(self, head_dim: int, theta: float):
        self.head_dim = head_dim
        self.theta = float(theta)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (B, L) -> cos, sin of shape (B, 1, L, head_dim), broadcast over heads."""
        # built per call, not stored: models are constructed on the meta device by from_pretrained
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.float64, device=positions.device) / self.head_dim
        inv_freq = (1.0 / self.theta**exponents).to(torch.float32)
        freqs = positions.to(torch.float32)[..., None] * inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)[:, None]
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, L, d) rotated by the (B, 1, L, d) tables."""
    return x * cos + rotate_half(x) * sin
