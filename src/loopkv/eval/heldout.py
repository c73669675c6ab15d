"""Teacher-forced next-token cross-entropy of every loop on fixed held-out windows. Its per-token
measure, per_loop_cross_entropy, is also what Ouro's training objective weights (train/objectives.py)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from loopkv.utils.device import model_device


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
