"""Rotary position embedding in its two layouts: rotate-half (Ouro: dim i pairs with i + d/2) and
interleaved (Huginn: dims 2i and 2i+1 pair, the complex-number form). Frequency i is
theta^(-2i/d) in both; only which dims a pair rotates differs."""
from __future__ import annotations

import torch

ROPE_STYLES = ("rotate_half", "interleaved")


class Rotary:
    """cos/sin tables for given positions; no parameters, so caches and the model can each hold one."""

    def __init__(self, head_dim: int, theta: float, style: str = "rotate_half", rotated_pairs: int | None = None):
        """`rotated_pairs`: only the first (highest-frequency) pairs rotate, the others keep angle 0
        (decoupled RoPE: the content dims carry no position); None: every pair rotates."""
        if style not in ROPE_STYLES:
            raise ValueError(f"rope style must be one of {ROPE_STYLES}, got {style!r}")
        if rotated_pairs is not None and not 0 <= rotated_pairs <= head_dim // 2:
            raise ValueError(f"rotated_pairs must be in [0, {head_dim // 2}], got {rotated_pairs}")
        self.head_dim = head_dim
        self.theta = float(theta)
        self.style = style
        self.rotated_pairs = rotated_pairs

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (B, L) -> cos, sin of shape (B, 1, L, head_dim), broadcast over heads."""
        # built per call, not stored: models are constructed on the meta device by from_pretrained
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.float64, device=positions.device) / self.head_dim
        inv_freq = (1.0 / self.theta**exponents).to(torch.float32)
        if self.rotated_pairs is not None:
            inv_freq[self.rotated_pairs:] = 0.0
        freqs = positions.to(torch.float32)[..., None] * inv_freq
        if self.style == "rotate_half":
            emb = torch.cat([freqs, freqs], dim=-1)[:, None]
        else:
            emb = freqs.repeat_interleave(2, dim=-1)[:, None]
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def apply(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x (B, H, L, d) rotated by this style's (B, 1, L, d) tables."""
        if self.style == "rotate_half":
            return apply_rope(x, cos, sin)
        return x * cos + rotate_pairs(x) * sin


def rope_dims(head_dim: int, d_rope: int, style: str = "rotate_half") -> tuple[torch.Tensor, torch.Tensor]:
    """(rotated, content) dim indices of a head split for decoupled RoPE: the d_rope dims of the
    d_rope / 2 highest-frequency pairs keep their rotation, the rest (content) carry none. The
    highest frequencies are kept because they are the ones whose angle changes most with distance."""
    if d_rope % 2 or not 0 <= d_rope <= head_dim:
        raise ValueError(f"d_rope must be even and in [0, {head_dim}], got {d_rope}")
    pair = torch.arange(head_dim) % (head_dim // 2) if style == "rotate_half" else torch.arange(head_dim) // 2
    rotated = pair < d_rope // 2
    return rotated.nonzero().flatten(), (~rotated).nonzero().flatten()


def half_layout_order(head_dim: int, device=None) -> torch.Tensor:
    """Indices taking an interleaved-layout vector to the rotate-half layout (x[..., order]): dims
    0, 2, 4, ... then 1, 3, 5, .... Rotating there is rotating interleaved, then reordering, and one
    order applied to queries and keys leaves every score q . k unchanged: a rotate-half kernel serves
    an interleaved model through it."""
    return torch.cat([torch.arange(0, head_dim, 2, device=device), torch.arange(1, head_dim, 2, device=device)])


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """(x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...): the interleaved layout's quarter turn."""
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, L, d) rotated by the (B, 1, L, d) rotate-half tables."""
    return x * cos + rotate_half(x) * sin
