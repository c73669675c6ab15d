"""Pack b-bit codes (b <= 8) densely into bytes: every 8 codes become b bytes, so a quantised
cache's allocated bytes are its bit budget, not a byte per code."""
from __future__ import annotations

import torch


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """codes (..., n) integers in [0, 2^bits), n % 8 == 0 -> uint8 (..., n * bits / 8)."""
    if codes.shape[-1] % 8:
        raise ValueError(f"last dimension must be a multiple of 8, got {codes.shape[-1]}")
    groups = codes.to(torch.int64).reshape(*codes.shape[:-1], -1, 8)
    word = torch.zeros(groups.shape[:-1], dtype=torch.int64, device=codes.device)
    for j in range(8):
        word |= groups[..., j] << (bits * j)
    out = torch.stack([(word >> (8 * m)) & 0xFF for m in range(bits)], dim=-1)
    return out.to(torch.uint8).reshape(*codes.shape[:-1], -1)


def unpack(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """Inverse of pack: uint8 (..., n * bits / 8) -> codes (..., n) (uint8 when bits divides 8,
    else int64)."""
    if 8 % bits == 0:
        # byte m holds codes m*k .. m*k+k-1 (k = 8 / bits) at shifts 0, bits, ...: decode the bytes
        # in place, the hot path of every cached read
        mask = (1 << bits) - 1
        codes = torch.stack([(packed >> (bits * i)) & mask for i in range(8 // bits)], dim=-1)
        return codes.reshape(*packed.shape[:-1], -1)
    wide = torch.int32 if 8 * bits < 32 else torch.int64   # 8 codes of 3 bits fit 24 bits
    groups = packed.to(wide).reshape(*packed.shape[:-1], -1, bits)
    word = torch.zeros(groups.shape[:-1], dtype=wide, device=packed.device)
    for m in range(bits):
        word |= groups[..., m] << (8 * m)
    mask = (1 << bits) - 1
    codes = torch.stack([(word >> (bits * j)) & mask for j in range(8)], dim=-1)
    return codes.reshape(*packed.shape[:-1], -1)
