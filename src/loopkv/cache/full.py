"""`full`: the teacher's cache. Every (loop, layer) keeps its own K and V for every token.

Bytes per token = 2 * T * D * H_kv * d_head * bytes(dtype)   (768 KiB for Ouro-1.4B in bf16).
"""
from __future__ import annotations

import math

import torch

from loopkv.cache.base import LoopCache, concat


class FullLoopCache(LoopCache):
    name = "full"
    label = "teacher"
    budgeted = False   # the teacher: the 1x reference, never configured by a ratio

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        return {"kwargs": {}, "ratio": 1.0} if math.isclose(ratio, 1.0) else None

    @classmethod
    def lossless_setting(cls, shape):
        return {}

    def __init__(self, config):
        super().__init__(config)
        n = self.num_loops * self.num_layers
        self.keys: list[torch.Tensor | None] = [None] * n  # post-RoPE
        self.values: list[torch.Tensor | None] = [None] * n

    def update(self, loop, layer, positions, k, v):
        i = self.entry(loop, layer)
        self.keys[i] = concat(self.keys[i], self.rope(positions, k))
        self.values[i] = concat(self.values[i], v)
        return self.keys[i], self.values[i]

    def reconstruct(self, loop, layer, trace):
        return trace.kv("k", loop, layer), trace.kv("v", loop, layer)

    def bytes_per_token(self, dtype):
        element = torch.tensor([], dtype=dtype).element_size()
        return 2 * self.num_loops * self.num_layers * self.num_kv_heads * self.head_dim * element

    def cached_tensors(self):
        return [t for t in self.keys + self.values if t is not None]

    def reorder_cache(self, beam_idx):
        self.keys = [t.index_select(0, beam_idx) if t is not None else None for t in self.keys]
        self.values = [t.index_select(0, beam_idx) if t is not None else None for t in self.values]
