"""Seeds: one global seed, and a stable per-purpose seed derived from it."""
from __future__ import annotations

import contextlib
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



# the seed of every measurement's own draws (Huginn's initial states in a held-out KL, CE or task score):
# one value, so the teacher and every method, and every measurement of a run, see the same draws
MEASUREMENT_SEED = 0


@contextlib.contextmanager
def fixed_draws(seed: int, device=None):
    """A context in which torch's random draws are those of `seed` and after which the caller's random
    stream is where it was: a measurement that draws (Huginn's initial states) repeats exactly and does
    not move a training run's stream. `device`: the model's, whose CUDA generator is forked too."""
    import torch

    devices = [device] if device is not None and torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def batch_draws(index: int):
    """The draws of batch `index` of a measurement (Huginn's initial states): seeded from the caller's
    stream as it stands, which this does not advance, and the batch's index. Batch k of the teacher and
    of a method (the same prompts in the same batches, computed the same way: both prefilled and decoded
    through a cache) then draw alike whatever earlier batches drew: without it a batch's draws depended
    on how many tokens the batches before it decoded. The seed hashes the generator's serialised state,
    so it is fixed for a torch version, not across versions; tasks run back to back under one
    fixed_draws reuse the same per-batch seeds (harmless: different prompts)."""
    import torch

    state = torch.random.get_rng_state()
    base = int.from_bytes(hashlib.sha256(state.numpy().tobytes()).digest()[:4], "little")
    with torch.random.fork_rng(devices=[]):   # the states are drawn on the host (modeling_huginn.initial_state)
        torch.manual_seed(derive_seed(base, "batch", str(index)))
        yield
