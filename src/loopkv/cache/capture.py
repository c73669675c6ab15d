"""`capture`: the teacher's full cache that also hands every (loop, layer)'s pre-RoPE K/V of the
new tokens to a sink. Calibration (SVD init, spectra) reads the teacher through it."""
from __future__ import annotations

from typing import Callable

import torch

from loopkv.cache.full import FullLoopCache

Sink = Callable[[int, int, torch.Tensor, torch.Tensor], None]


class CaptureCache(FullLoopCache):
    name = "capture"

    def __init__(self, config, sink: Sink):
        super().__init__(config)
        self.sink = sink

    def update(self, loop, layer, positions, k, v):
        self.sink(loop, layer, k, v)
        return super().update(loop, layer, positions, k, v)
