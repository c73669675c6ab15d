"""Ouro's training objective: expected next-token loss over the exit distribution, minus an entropy bonus.

    L = mean_tokens( sum_t p_t * CE_t ) - beta * mean_tokens( H(p) )

p is the per-token exit distribution over the T loops (gate-driven); the entropy term keeps the
gate from collapsing onto one loop early in training, so every loop keeps receiving gradient.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def per_loop_cross_entropy(loop_logits, labels: torch.Tensor) -> torch.Tensor:
    """loop_logits: T tensors (B, L, V); labels (B, L) aligned with the logits (-100 = ignore).
    Returns (T, B, L) token losses (0 where ignored)."""
    losses = []
    for logits in loop_logits:
        ce = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="none")
        losses.append(ce.view(labels.shape))
    return torch.stack(losses)


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


def distribution_match(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> dict:
    """Per token: KL(p_teacher || p_student) in nats and whether the argmaxes agree.
    Both (B, L, V); returns (B, L) tensors `kl` and `top1`."""
    t = torch.log_softmax(teacher_logits.float(), dim=-1)
    s = torch.log_softmax(student_logits.float(), dim=-1)
    kl = (t.exp() * (t - s)).sum(-1)
    return {"kl": kl, "top1": (teacher_logits.argmax(-1) == student_logits.argmax(-1)).float()}
