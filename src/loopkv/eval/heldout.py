"""Teacher-forced next-token cross-entropy on fixed held-out windows: of every loop (Ouro), or at each
test-time number of recurrence steps (Huginn). Its per-token measure, per_loop_cross_entropy, is also
what Ouro's training objective weights (train/objectives.py)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from loopkv.utils.device import model_device
from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws


def per_loop_cross_entropy(loop_logits, labels: torch.Tensor) -> torch.Tensor:
    """loop_logits: T tensors (B, L, V); labels (B, L) aligned with the logits (-100 = ignore).
    Returns (T, B, L) token losses (0 where ignored)."""
    losses = []
    for logits in loop_logits:
        ce = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="none")
        losses.append(ce.view(labels.shape))
    return torch.stack(losses)


@torch.no_grad()
def heldout_cross_entropy(model, windows: torch.Tensor, batch_size: int) -> dict:
    """Per-loop and exit-weighted next-token CE (nats/token) on fixed held-out windows."""
    model.eval()
    total_loops = None
    total_expected = 0.0
    count = 0
    for i in range(0, len(windows), batch_size):
        rows = windows[i:i + batch_size].to(model_device(model))
        out = model(rows[:, :-1], output_loop_logits=True, use_cache=False)
        ce = per_loop_cross_entropy(out.loop_logits, rows[:, 1:])          # (T, B, L)
        n = ce[0].numel()
        loops = ce.sum(dim=(1, 2))
        total_loops = loops if total_loops is None else total_loops + loops
        total_expected += float((out.exit_pdf.permute(2, 0, 1) * ce).sum())
        count += n
    model.train()
    per_loop = (total_loops / count).tolist()
    return {"final_loop_ce": per_loop[-1], "per_loop_ce": per_loop, "expected_ce": total_expected / count}


@torch.no_grad()
def heldout_cross_entropy_by_steps(model, windows: torch.Tensor, batch_size: int, steps: list[int]) -> dict:
    """Huginn: next-token CE (nats/token) at each number of recurrence steps in `steps`, every count run
    from the same initial states (drawn once per batch, the same draws at every measurement)."""
    model.eval()
    device = model_device(model)
    totals = {n: 0.0 for n in steps}
    count = 0
    with fixed_draws(MEASUREMENT_SEED, device):
        for i in range(0, len(windows), batch_size):
            rows = windows[i:i + batch_size].to(device)
            start = model.loop_forward_kwargs(rows[:, :-1])["input_states"]
            for n in steps:
                logits = model(rows[:, :-1], num_steps=n, input_states=start, use_cache=False).logits
                totals[n] += float(F.cross_entropy(logits.flatten(0, 1).float(), rows[:, 1:].flatten(),
                                                   reduction="sum"))
            count += rows[:, 1:].numel()
    model.train()
    return {f"ce_at_{n}": totals[n] / count for n in steps}


def eval_steps(mean_recurrence: int) -> list[int]:
    """Huginn's test-time step counts measured: powers of two up to twice the training mean, and the mean."""
    steps, n = {mean_recurrence}, 1
    while n <= 2 * mean_recurrence:
        steps.add(n)
        n *= 2
    return sorted(steps)


def family_heldout(model, windows: torch.Tensor, batch_size: int) -> dict:
    """A teacher's held-out measurement, as its family defines it: every loop's CE and the exit-weighted
    one (Ouro), or the CE at each test-time step count of eval_steps (Huginn), "ce" at the config's."""
    if model.config.model_type == "huginn_raven":
        steps = model.config.mean_recurrence
        result = heldout_cross_entropy_by_steps(model, windows, batch_size, eval_steps(steps))
        return {"ce": result[f"ce_at_{steps}"], **result}
    return heldout_cross_entropy(model, windows, batch_size)
