"""`final_loop`: final-loop reuse (LLA paper baseline). A past token keeps only its last loop's K/V
per layer and every loop reads that; no training. A token's own loops use its exact K/V.

Bytes per token = 2 * D * H_kv * d_head * bytes(dtype)   (T times less than the teacher).
"""
from __future__ import annotations

import torch

from loopkv.cache.base import LoopCache, concat
from loopkv.cache.budget import one_row_setting


class FinalLoopCache(LoopCache):
    name = "final_loop"
    label = "final-loop"
    token_stores = {"keys": 2, "values": 2}
    not_checked = {"lossless": "keeps only the last loop's K/V: lossless only on a one-loop model "
                               "(tests/cache/test_final_loop.py)"}

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        return one_row_setting(shape, ratio)

    @classmethod
    def lossless_setting(cls, shape):
        return {} if shape.loops == 1 else None   # the last loop is every loop only when T = 1

    def __init__(self, config):
        super().__init__(config)
        self.keys: list[torch.Tensor | None] = [None] * self.num_layers   # post-RoPE
        self.values: list[torch.Tensor | None] = [None] * self.num_layers

    def update(self, loop, layer, positions, k, v):
        new_k = self.rope(positions, k)
        past_k, past_v = self.keys[layer], self.values[layer]
        if loop == self.num_loops - 1:
            self.keys[layer], self.values[layer] = concat(past_k, new_k), concat(past_v, v)
            return self.keys[layer], self.values[layer]
        if past_k is None:
            return new_k, v
        return torch.cat([past_k, new_k], dim=2), torch.cat([past_v, v], dim=2)

    def reconstruct(self, loop, layer, trace):
        last = self.num_loops - 1
        return trace.kv("k", last, layer), trace.kv("v", last, layer)

    def loop_bytes_per_token(self, dtype):
        element = torch.tensor([], dtype=dtype).element_size()
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * element

    def loop_tensors(self):
        return [t for t in self.keys + self.values if t is not None]
