"""`mla_head`: the head-axis baseline of the LLA paper. Each (loop, layer) entry of a token keeps
one K latent and one V latent over its heads, x = [heads, d_head] (width H*d_head), SVD-initialised
like LLA; loops are not shared, so a token is encoded at every loop as soon as its K/V exist.

Bytes per token = T * D * (r_k + r_v) * bytes(dtype).
"""
from __future__ import annotations

import torch

from loopkv.cache.base import LoopCache, concat
from loopkv.cache.budget import LatentBudget
from loopkv.cache.latent_codec import LAYOUTS, LatentCodec


class MLAHeadCache(LatentBudget, LoopCache):
    name = "mla_head"
    label = "mla_head"
    token_stores = {"latents": 1}   # (B, S, 1, r)
    layout = "per_loop"

    def __init__(self, config, codec: LatentCodec):
        super().__init__(config)
        if codec.groups != LAYOUTS[self.layout]:
            raise ValueError(f"{self.name} needs a codec with groups {LAYOUTS[self.layout]}, got {codec.groups}")
        self.codec = codec
        n = self.num_loops * self.num_layers
        self.latents: dict[str, list[torch.Tensor | None]] = {"k": [None] * n, "v": [None] * n}

    def update(self, loop, layer, positions, k, v):
        i = self.entry(loop, layer)
        group = self._group(loop, layer)
        past = [self._decode(kind, group, self.latents[kind][i]) for kind in ("k", "v")]
        for kind, x in (("k", k), ("v", v)):
            self.latents[kind][i] = concat(self.latents[kind][i], self._encode(kind, group, x), dim=1)
        new_k = self.rope(positions, k)
        if past[0] is None:
            return new_k, v
        return (torch.cat([self.rope(self.positions, past[0]), new_k], dim=2),
                torch.cat([past[1], v], dim=2))

    def reconstruct(self, loop, layer, trace):
        group = self._group(loop, layer)
        return tuple(self._decode(kind, group, self._encode(kind, group, trace.kv(kind, loop, layer)))
                     for kind in ("k", "v"))

    def _group(self, loop: int, layer: int) -> slice:
        """The codec group of one (loop, layer) entry (groups are ordered layer-major)."""
        g = layer * self.num_loops + loop
        return slice(g, g + 1)

    def _encode(self, kind: str, group: slice, x: torch.Tensor) -> torch.Tensor:
        """pre-RoPE (B, H, L, d_head) -> latent (B, L, 1, r)."""
        return self.codec.encode(kind, x.transpose(1, 2).flatten(-2).unsqueeze(2), group)

    def _decode(self, kind: str, group: slice, latent: torch.Tensor | None):
        """latent (B, S, 1, r) -> pre-RoPE (B, H, S, d_head)."""
        if latent is None:
            return None
        x = self.codec.decode(kind, latent, group)[:, :, 0]                # (B, S, H*dh)
        b, s = x.shape[:2]
        return x.reshape(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)

    def loop_bytes_per_token(self, dtype):
        return self.codec.bytes_per_token(dtype)

    def loop_tensors(self):
        return [t for kind in ("k", "v") for t in self.latents[kind] if t is not None]
