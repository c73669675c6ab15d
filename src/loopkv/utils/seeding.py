"""Seeds: one global seed, and a stable per-purpose seed derived from it."""
from __future__ import annotations

import hashlib
import random

import numpy as np


def derive_seed(seed: int, *purpose: str) -> int:
    digest = hashlib.sha256(":".join([str(seed), *purpose]).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
