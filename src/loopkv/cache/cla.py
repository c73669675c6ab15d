"""`cla`: cross-layer sharing (LLA paper's layer-axis baseline). Layers are grouped in spans of
`span` adjacent layers; per loop, only the first layer of a group stores K/V, and the other layers
of the group read past tokens through it. New tokens use their own exact K/V at every layer (the
same rule as the other methods: a token's own forward is exact). span 1 is the teacher.

Bytes per token = 2 * T * ceil(D / span) * H_kv * d_head * bytes(dtype).
"""
from __future__ import annotations

import math

import torch

from loopkv.cache.base import LoopCache, concat


class CLACache(LoopCache):
    name = "cla"
    label = "cla"
    token_stores = {"keys": 2, "values": 2}   # (B, H, S, d): a group's owner's store

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        """D / ceil(D / span) x fewer bytes: only the spans whose ratio is `ratio`."""
        D = shape.layers
        for span in range(1, D + 1):
            achieved = D / math.ceil(D / span)
            if math.isclose(achieved, ratio, rel_tol=1e-3):
                return {"kwargs": {"span": span}, "ratio": achieved}
        return None

    @classmethod
    def lossless_setting(cls, shape):
        return {"span": 1}   # every layer its own group: the teacher

    def __init__(self, config, span: int):
        super().__init__(config)
        if not 1 <= span <= self.num_layers:
            raise ValueError(f"span must be in [1, {self.num_layers}], got {span}")
        self.span = span
        self.num_groups = math.ceil(self.num_layers / span)
        n = self.num_loops * self.num_groups
        self.keys: list[torch.Tensor | None] = [None] * n    # post-RoPE, per (loop, group)
        self.values: list[torch.Tensor | None] = [None] * n

    def update(self, loop, layer, positions, k, v):
        i = loop * self.num_groups + layer // self.span
        new_k = self.rope(positions, k)
        past = self.get_seq_length()
        stored_k, stored_v = self.keys[i], self.values[i]
        if layer % self.span == 0:   # the group's owner stores the new tokens
            self.keys[i], self.values[i] = concat(stored_k, new_k), concat(stored_v, v)
        if stored_k is None or past == 0:
            return new_k, v
        # the owner ran first in this loop and already appended the new tokens: read the past only
        return (torch.cat([stored_k[:, :, :past], new_k], dim=2),
                torch.cat([stored_v[:, :, :past], v], dim=2))

    def reconstruct(self, loop, layer, trace):
        owner = layer // self.span * self.span
        return trace.kv("k", loop, owner), trace.kv("v", loop, owner)

    def loop_bytes_per_token(self, dtype):
        element = torch.tensor([], dtype=dtype).element_size()
        return 2 * self.num_loops * self.num_groups * self.num_kv_heads * self.head_dim * element

    def loop_tensors(self):
        return [t for t in self.keys + self.values if t is not None]
