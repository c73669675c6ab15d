"""MELT's cross-loop state update (MELT paper, Section 3 and its gate ablation, Table 3).

Per layer, each token carries a latent state h across the T loops; the layer's K and V are
projected from h instead of from the loop's own input x, so a token needs one cache row per layer
whatever T is. The update at loop t (1-based) for the token's layer input x_t:

    full    z_t = sigmoid(x_t W_z + h_{t-1} U_z + b_z)   element-wise, width d
    single  z_t = sigmoid(x_t w_z + h_{t-1} u_z + b_z)   one scalar per token
    mean    z_t = (t - 1) / t                            h_t = mean(x_1 .. x_t)
    ema     z_t = decay                                  fixed exponential moving average
    last    z_t = 0                                      h_t = x_t (no memory)

    h_t = z_t * h_{t-1} + (1 - z_t) * x_t

The state starts as the first loop's input, h_1 = x_1, for every variant (the paper does not state
h_0; with h_0 = 0 a gated first loop would shrink x_1 for no reason).

GATES is the one definition of the variants: each one's rule, its row in the paper's Table 3 and
whether it reads ema_decay. VARIANTS (the names), TABLE3_ORDER (the recipes' Table 3 order) and the
config's gate names derive from it; the paper's Table 3 numbers are in report/paper_values.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass(frozen=True)
class GateVariant:
    name: str
    table3_row: int                        # its row in MELT's Table 3 (the paper's order, best first)
    learned_width: str | None = None       # learned z = sigmoid(x W + h U + b): "hidden" (element-wise) or "one"
    fixed: Callable[[int, float], float] | None = None   # a fixed z_t from (0-based loop, ema_decay)
    reads_ema_decay: bool = False          # its update depends on ema_decay (config melt.ema_decay)


def _running_mean(loop: int, decay: float) -> float:
    return loop / (loop + 1)


def _fixed_decay(loop: int, decay: float) -> float:
    return decay


def _no_memory(loop: int, decay: float) -> float:
    return 0.0


# named functions, not lambdas: a gate (and a model holding one) stays picklable
GATES = (
    GateVariant("full", 0, learned_width="hidden"),
    GateVariant("single", 1, learned_width="one"),
    GateVariant("mean", 4, fixed=_running_mean),
    GateVariant("ema", 3, fixed=_fixed_decay, reads_ema_decay=True),
    GateVariant("last", 2, fixed=_no_memory),
)
VARIANTS = tuple(g.name for g in GATES)
TABLE3_ORDER = tuple(g.name for g in sorted(GATES, key=lambda g: g.table3_row))


def gate_variant(name: str) -> GateVariant:
    for g in GATES:
        if g.name == name:
            return g
    raise ValueError(f"gate variant must be one of {VARIANTS}, got {name!r}")


class MeltGate(nn.Module):
    def __init__(self, hidden_size: int, variant: str = "full", ema_decay: float = 0.5):
        super().__init__()
        self.rule = gate_variant(variant)
        if not 0.0 <= ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {ema_decay}")
        self.variant = variant
        self.ema_decay = ema_decay
        if self.rule.learned_width is not None:
            width = hidden_size if self.rule.learned_width == "hidden" else 1
            self.input_gate = nn.Linear(hidden_size, width, bias=True)     # W_z, b_z
            self.state_gate = nn.Linear(hidden_size, width, bias=False)    # U_z
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Zero gates: z = 1/2 everywhere at the start of training."""
        if self.rule.learned_width is not None:
            nn.init.zeros_(self.input_gate.weight)
            nn.init.zeros_(self.input_gate.bias)
            nn.init.zeros_(self.state_gate.weight)

    def gate(self, loop: int, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """z_t for 0-based `loop` >= 1; broadcastable to x (..., d)."""
        if self.rule.learned_width is not None:
            return torch.sigmoid(self.input_gate(x) + self.state_gate(h))
        return torch.full_like(x[..., :1], self.rule.fixed(loop, self.ema_decay))

    def forward(self, loop: int, x: torch.Tensor, h: torch.Tensor | None) -> torch.Tensor:
        """The state after 0-based `loop`, from the layer input x (..., d) and the previous state."""
        if loop == 0 or h is None:
            return x
        z = self.gate(loop, x, h)
        return z * h + (1 - z) * x
