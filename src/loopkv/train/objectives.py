"""Ouro's training objective: expected next-token loss over the exit distribution, minus an entropy bonus.

    L = mean_tokens( sum_t p_t * CE_t ) - beta * mean_tokens( H(p) )

p is the per-token exit distribution over the T loops (gate-driven); the entropy term keeps the
gate from collapsing onto one loop early in training, so every loop keeps receiving gradient.
CE_t is the per-loop cross-entropy evaluation measures held out (eval/heldout.py).
"""
from __future__ import annotations

import torch

from loopkv.eval.heldout import per_loop_cross_entropy


def ouro_loss(loop_logits, exit_pdf: torch.Tensor, labels: torch.Tensor, entropy_beta: float) -> dict:
    """exit_pdf (B, L, T). Returns the scalar `loss` and detached diagnostics."""
    ce = per_loop_cross_entropy(loop_logits, labels)            # (T, B, L)
    valid = (labels != -100).float()
    n = valid.sum().clamp(min=1)
    pdf = exit_pdf.permute(2, 0, 1)                              # (T, B, L)
    expected = (pdf * ce).sum(0)
    entropy = -(exit_pdf * exit_pdf.clamp(min=1e-12).log()).sum(-1)
    loss = (expected * valid).sum() / n - entropy_beta * (entropy * valid).sum() / n
    with torch.no_grad():
        per_loop = (ce * valid).sum(dim=(1, 2)) / n
        mean_pdf = (pdf * valid).sum(dim=(1, 2)) / n
    return {
        "loss": loss,
        "expected_ce": ((expected * valid).sum() / n).detach(),
        "entropy": ((entropy * valid).sum() / n).detach(),
        "per_loop_ce": per_loop,
        "mean_exit_pdf": mean_pdf,
    }
