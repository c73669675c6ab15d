"""Ouro's training objective: expected next-token loss over the exit distribution, minus an entropy bonus.

    L = mean_tokens( sum_t p_t * CE_t ) - beta * mean_tokens( H(p) )

p is the per-token exit distribution over the T loops (gate-driven); the entropy term keeps the
gate from collapsing onto one loop early in training, so every loop keeps receiving gradient.
CE_t is the per-loop cross-entropy evaluation measures held out (eval/heldout.py).

The entropy bonus is beta * KL(p || uniform) up to a constant. With a prior pi over the exits
(`exit_prior`), the regulariser is beta * KL(p || pi) instead: L adds -beta * mean_tokens(sum_t p_t
log pi_t), which pulls the gate, and with it the share of gradient each loop's exit gets, toward pi.
A prior leaning to the later loops trains them most (a small model trained on uniform weights makes
loop 1 as good as loop T, and its later loops add nothing).
"""
from __future__ import annotations

import torch

from loopkv.eval.heldout import per_loop_cross_entropy


def ouro_loss(loop_logits, exit_pdf: torch.Tensor, labels: torch.Tensor, entropy_beta: float,
              exit_prior: list[float] | None = None) -> dict:
    """exit_pdf (B, L, T). exit_prior: T positive weights (normalised here), or None for the uniform
    prior (the plain entropy bonus). Returns the scalar `loss` and detached diagnostics."""
    ce = per_loop_cross_entropy(loop_logits, labels)            # (T, B, L)
    valid = (labels != -100).float()
    n = valid.sum().clamp(min=1)
    pdf = exit_pdf.permute(2, 0, 1)                              # (T, B, L)
    expected = (pdf * ce).sum(0)
    entropy = -(exit_pdf * exit_pdf.clamp(min=1e-12).log()).sum(-1)
    loss = (expected * valid).sum() / n - entropy_beta * (entropy * valid).sum() / n
    if exit_prior is not None:
        if len(exit_prior) != exit_pdf.shape[-1] or min(exit_prior) <= 0:
            raise ValueError(f"exit_prior needs {exit_pdf.shape[-1]} positive weights, got {exit_prior}")
        log_prior = torch.tensor(exit_prior, dtype=exit_pdf.dtype, device=exit_pdf.device)
        log_prior = (log_prior / log_prior.sum()).log()
        loss = loss - entropy_beta * ((exit_pdf * log_prior).sum(-1) * valid).sum() / n
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
