"""`full`: the teacher's cache. Every (loop, layer) keeps its own K and V for every token, and so
does every non-looped layer (Huginn's prelude and coda; Ouro has none).

Bytes per token = 2 * (T * D + O) * H_kv * d_head * bytes(dtype)   (768 KiB for Ouro-1.4B in bf16),
O = non-looped layers. T is the number of loops the cached tokens ran: the config's until the first
forward, then that forward's (Huginn's num_steps is a forward argument, so the cache sizes itself
from the steps actually run; every later forward through the cache must run as many).
"""
from __future__ import annotations

import math

import torch

from loopkv.cache.base import LoopCache, concat
from loopkv.errors import LoopKVError


class FullLoopCache(LoopCache):
    name = "full"
    label = "teacher"
    budgeted = False   # the teacher: the 1x reference, never configured by a ratio
    token_stores = {"keys": 2, "values": 2}

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
        self._loops_run = 0   # loops the running forward has reached

    def begin_forward(self, positions):
        super().begin_forward(positions)
        self._loops_run = 0

    def update(self, loop, layer, positions, k, v):
        i = self.entry(loop, layer)
        if i >= len(self.keys):   # more loops than the config's default: grow by whole loops
            extra = (loop + 1) * self.num_layers - len(self.keys)
            self.keys += [None] * extra
            self.values += [None] * extra
        self._check_past(self.keys[i], f"loop {loop}, layer {layer}")
        self._loops_run = max(self._loops_run, loop + 1)
        self.keys[i] = concat(self.keys[i], self.rope(positions, k))
        self.values[i] = concat(self.values[i], v)
        return self.keys[i], self.values[i]

    def expect_loops(self, loops):
        # the first forward sizes the cache (end_forward); later ones must run as many
        if self.get_seq_length():
            super().expect_loops(loops)

    def _check_past(self, stored, where: str) -> None:
        # an entry missing cached tokens would be attended as if they were not there
        held = 0 if stored is None else stored.shape[2]
        if held != self.get_seq_length():
            raise LoopKVError(f"full cache: {where} holds K/V of {held} tokens, the cache {self.get_seq_length()}: "
                              f"every forward through one cache must run the same number of loops "
                              f"(the cached tokens ran {self.num_loops})")

    def end_forward(self):
        if self._loops_run:
            if self.get_seq_length() and self._loops_run != self.num_loops:
                raise LoopKVError(f"full cache: this forward ran {self._loops_run} loops, the cached tokens "
                                  f"{self.num_loops}: every forward through one cache must run as many")
            self.num_loops = self._loops_run   # the first forward's count sizes the cache
            del self.keys[self.num_loops * self.num_layers:], self.values[self.num_loops * self.num_layers:]
        super().end_forward()

    def reconstruct(self, loop, layer, trace):
        return trace.kv("k", loop, layer), trace.kv("v", loop, layer)

    def loop_bytes_per_token(self, dtype):
        return self.every_loop_bytes_per_token(dtype)

    def loop_tensors(self):
        return [t for t in self.keys + self.values if t is not None]
