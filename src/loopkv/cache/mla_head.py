"""`mla_head`: the head-axis baseline of the LLA paper. Each (loop, layer) entry of a token keeps
one K latent and one V latent over its heads, x = [heads, d_head] (width H*d_head), SVD-initialised
like LLA; loops are not shared, so a token is encoded at every loop as soon as its K/V exist. The
new tokens of a forward read their own and each other's exact K/V; later tokens read the decoded ones.

Read paths (config `read_path`), as LLA's:
- latent: only latents persist; every read decodes the (loop, layer)'s whole history and rotates it.
- full: the decoded, rotated K/V are stored (written over the new tokens' exact K/V at the end of
  their forward): no memory saving, one decode per token and (loop, layer) instead of one per read.
  The same values: a token's decoded row depends on its own latent and the codec only.

Bytes per token: latent = T * D * (r_k + r_v) * bytes(dtype); full = the teacher's.
"""
from __future__ import annotations

import torch

from loopkv.cache.base import LoopCache, concat, overwrite_tail
from loopkv.cache.budget import LatentBudget
from loopkv.cache.latent_codec import LAYOUTS, LatentCodec

READ_PATHS = ("latent", "full")


class MLAHeadCache(LatentBudget, LoopCache):
    name = "mla_head"
    label = "mla_head"
    token_stores = {"latents": 1, "recon": 2}   # latents (B, S, 1, r); full path: (B, H, S, d)
    layout = "per_loop"
    read_paths = READ_PATHS
    served_config_keys = ("methods.read_path",)
    bookkeeping = LoopCache.bookkeeping + ("_unwritten",)   # full path: a forward's latents until end_forward

    def __init__(self, config, codec: LatentCodec, read_path: str = "latent"):
        super().__init__(config)
        if read_path not in READ_PATHS:
            raise ValueError(f"read_path must be one of {READ_PATHS}, got {read_path!r}")
        if codec.groups != LAYOUTS[self.layout]:
            raise ValueError(f"{self.name} needs a codec with groups {LAYOUTS[self.layout]}, got {codec.groups}")
        self.codec = codec
        self.read_path = read_path
        n = self.num_loops * self.num_layers
        self.latents: dict[str, list[torch.Tensor | None]] = {"k": [None] * n, "v": [None] * n}
        self.recon: dict[str, list[torch.Tensor | None]] = {"k": [None] * n, "v": [None] * n}
        self._unwritten: list[tuple[int, slice, dict[str, torch.Tensor]]] = []

    def update(self, loop, layer, positions, k, v):
        i = self.entry(loop, layer)
        group = self._group(loop, layer)
        if self.read_path == "full":   # the store is what attention reads; the new tokens exact until end_forward
            self._unwritten.append((i, group, {kind: self._encode(kind, group, x) for kind, x in (("k", k), ("v", v))}))
            self.recon["k"][i] = concat(self.recon["k"][i], self.rope(positions, k))
            self.recon["v"][i] = concat(self.recon["v"][i], v)
            return self.recon["k"][i], self.recon["v"][i]
        past = [self._decode(kind, group, self.latents[kind][i]) for kind in ("k", "v")]
        for kind, x in (("k", k), ("v", v)):
            self.latents[kind][i] = concat(self.latents[kind][i], self._encode(kind, group, x), dim=1)
        new_k = self.rope(positions, k)
        if past[0] is None:
            return new_k, v
        return (torch.cat([self.rope(self.positions, past[0]), new_k], dim=2),
                torch.cat([past[1], v], dim=2))

    def end_forward(self):
        # full path: the new tokens' exact K/V, which this forward's attention read, are overwritten in
        # place by their decoded rows, which later tokens must read (as lla.py's full path)
        for i, group, latents in self._unwritten:
            for kind, latent in latents.items():
                x = self._decode(kind, group, latent)
                if kind == "k":
                    x = self.rope(self._new_positions, x)
                overwrite_tail(self.recon[kind], i, x)
        self._unwritten = []
        super().end_forward()

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
        if self.read_path == "full":
            return self.every_loop_bytes_per_token(dtype)
        return self.codec.bytes_per_token(dtype)

    def loop_tensors(self):
        stores = self.recon if self.read_path == "full" else self.latents
        return [t for kind in ("k", "v") for t in stores[kind] if t is not None]
