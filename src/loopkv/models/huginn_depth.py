"""Huginn's training-time depth: a random number of recurrence steps per batch, gradient through the
last few only (truncated backpropagation), as the Huginn paper trains (Geiping et al. 2025, Sec. 3.3).

Total steps p = 1 + Poisson(rate), rate ~ LogNormal(log(r) - sigma^2 / 2, sigma), sigma = 1/2, r =
max(mean_recurrence, mean_backprop_depth) (so E[rate] = r); of those, the last k = min(p, mean_backprop_depth) run with gradient
and the first p - k without. Every step's state starts from the same random initial state."""
from __future__ import annotations

import math

import torch

SIGMA = 0.5   # of the log-normal rate


def sample_depth(mean_recurrence: int, backprop_depth: int, generator: torch.Generator | None = None) -> tuple[int, int]:
    """(steps without grad, steps with grad) of one training batch."""
    mu = math.log(max(mean_recurrence, backprop_depth)) - SIGMA ** 2 / 2
    rate = torch.empty(1).log_normal_(mu, SIGMA, generator=generator)
    total = int(torch.poisson(rate, generator=generator)) + 1
    with_grad = min(total, backprop_depth)
    return total - with_grad, with_grad
