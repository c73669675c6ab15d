"""What a training run writes to its job's log: the step it resumed from, and at every held-out
measurement or checkpoint one line with the step, the mean train loss and the tokens/s of the steps
since the previous line (over those steps' own time: measuring and saving left out), the latest
held-out measurement and, at a checkpoint, its path.

The rules run training with --no-progress, so these lines are all a job's log says about it. With
progress bars on they go through tqdm (logging_redirect_tqdm), which redraws the bar below them.
"""
from __future__ import annotations

import logging
import math
from numbers import Real


def measured(values: dict) -> str:
    """The scalar entries of a measurement, `name=value` each (its step and lists such as the per-loop
    CE left out)."""
    return " ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
                    if k != "step" and isinstance(v, Real) and not isinstance(v, bool))


class StepLog:
    """The log lines of one training run (`desc` names it: teacher, distill, melt-stage1, ...)."""

    def __init__(self, log: logging.Logger, desc: str, total_steps: int, enabled: bool = True):
        self.log, self.desc, self.total, self.enabled = log, desc, total_steps, enabled
        self.heldout: tuple[int, dict] | None = None        # (step, measurement) of the latest one
        self._losses: list[float] = []
        self._tokens, self._seconds = 0, 0.0

    def resumed(self, step: int, source, heldout: dict | None = None) -> None:
        """Resumed at `step` from `source`; `heldout`: the latest measurement before it (with its "step")."""
        if heldout is not None:
            self.heldout = (heldout["step"], heldout)
        if self.enabled:
            self.log.info("%s: resumed from step %d/%d (%s)", self.desc, step, self.total, source)

    def step(self, loss: float, tokens: int, seconds: float) -> None:
        """One training step: its loss, the tokens of its (global) batch and its wall time."""
        self._losses.append(loss)
        self._tokens += tokens
        self._seconds += seconds

    def report(self, step: int, heldout: dict | None = None, checkpoint=None) -> None:
        """The line of `step`, after its held-out measurement (`heldout`) and/or its checkpoint."""
        if heldout is not None:
            self.heldout = (step, heldout)
        if self.enabled:
            parts = [f"{self.desc} step {step}/{self.total}"]
            if self._losses:
                speed = self._tokens / self._seconds if self._seconds > 0 else math.inf
                count = len(self._losses)
                parts.append(f"train loss {sum(self._losses) / count:.5g} over {count} step{'s' * (count != 1)}, "
                             f"{speed:.0f} tokens/s")
            if self.heldout is not None:
                at, values = self.heldout
                parts.append(f"held-out {measured(values)}" + ("" if at == step else f" (at step {at})"))
            if checkpoint is not None:
                parts.append(f"checkpoint {checkpoint}")
            self.log.info("%s", ", ".join(parts))
        self._losses, self._tokens, self._seconds = [], 0, 0.0
