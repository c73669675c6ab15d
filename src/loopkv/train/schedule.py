"""Learning-rate schedule: linear warmup, then cosine decay to lr * min_ratio."""
from __future__ import annotations

import math


def warmup_cosine(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """Multiplier on the peak lr at 0-based `step`."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
