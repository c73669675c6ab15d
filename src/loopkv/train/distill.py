"""Codec distillation (LLA paper Eq. 5): the teacher is frozen, only the codec trains.

    L = mean_tokens KL(p_teacher || p_student) + lambda_attn * mean_{t,d} MSE(a_{t,d}, a_hat_{t,d})

p are final-loop next-token distributions; a_{t,d} is the attention output (before o_proj) at
loop t, layer d. The paper writes the attention term as ||a - a_hat||^2 summed over (t, d) and
divided by T*D; we take the squared error as a mean over elements, so lambda_attn does not scale
with the head width (our reading; the paper does not state the normalisation).

The student forward is the paper's two-pass re-forward: pass 1 runs the teacher and records every
token's exact pre-RoPE K/V; pass 2 runs the same frozen weights with attention reading earlier
tokens through the codec's reconstruction of those K/V (each token's own K/V stays exact), see
cache/teacher_forced.py. Gradients reach the codec through pass 2 only.

Training runs through the shared DeepSpeed engine. Batches and the learning rate are functions of
the step, the held-out KL is measured every `eval_every` steps on fixed validation windows (step 0
is the SVD-only codec) and the best-KL codec is what the stage returns.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from loopkv.cache.base import LoopCache
from loopkv.cache.full import FullLoopCache
from loopkv.cache.teacher_forced import teacher_forced_forward
from loopkv.eval.fidelity import distribution_match
from loopkv.train.engine import Engine
from loopkv.train.stage_loop import train_stage
from loopkv.utils.device import model_device
from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws


class CodecDistiller(torch.nn.Module):
    """Frozen teacher + the trainable codec of `view`; forward(ids) -> the Eq. 5 terms."""

    def __init__(self, teacher, view: LoopCache, lambda_attn: float):
        super().__init__()
        self.teacher = teacher.eval().requires_grad_(False)
        self.codec = view.codec
        self.view = view
        self.exact = FullLoopCache(teacher.config)
        self.lambda_attn = lambda_attn

    def forward(self, ids: torch.Tensor, weights: torch.Tensor | None = None) -> dict:
        """`weights` (B, L), optional: which positions' next-token distributions (and attention
        outputs) count, e.g. only those that drew a student-generated token (on-policy)."""
        device = model_device(self.teacher)   # where the engine keeps the module: batches come from the host
        ids = ids.to(device)
        # both passes start from the same state (Huginn's is random) and pass 2 has gradient in every loop
        run = self.teacher.loop_forward_kwargs(ids, grad=True)
        with torch.no_grad():
            t_out, t_trace = teacher_forced_forward(self.teacher, ids, self.exact, **run)
        s_out, s_trace = teacher_forced_forward(self.teacher, ids, self.view, source=t_trace, **run)
        match = distribution_match(t_out.logits, s_out.logits)
        if weights is None:
            weights = torch.ones(ids.shape, dtype=torch.float32, device=device)
        weights = weights.to(device=device, dtype=torch.float32)
        total = weights.sum().clamp(min=1)
        kl = (match["kl"] * weights).sum() / total
        attn = torch.stack([_weighted_mse(s_trace.outputs[key], t_trace.outputs[key], weights)
                            for key in t_trace.outputs]).mean()
        return {"loss": kl + self.lambda_attn * attn, "kl": kl.detach(), "attn": attn.detach(),
                "top1": ((match["top1"] * weights).sum() / total).detach()}


def _weighted_mse(student: torch.Tensor, teacher: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the weighted positions; attention outputs are (B, H, L, d)."""
    err = (student.float() - teacher.float()).pow(2).mean(dim=(1, 3))          # (B, L)
    return (err * weights).sum() / weights.sum().clamp(min=1)


@torch.no_grad()
def heldout_match(distiller: CodecDistiller, windows: torch.Tensor, batch_size: int) -> dict:
    """Teacher-forced (two-pass) KL and top-1 agreement on fixed windows: checkpoint selection. Every
    measurement makes the same random draws (at a tiny Huginn, a new initial state moves the KL by more
    than training does) and leaves the training's random stream where it was (resume stays bitwise)."""
    kl, top1, n = 0.0, 0.0, 0
    with fixed_draws(MEASUREMENT_SEED, model_device(distiller.teacher)):
        for i in range(0, len(windows), batch_size):
            terms = distiller(windows[i:i + batch_size])
            count = windows[i:i + batch_size].numel()
            kl += float(terms["kl"]) * count
            top1 += float(terms["top1"]) * count
            n += count
    return {"kl": kl / n, "top1": top1 / n, "n_tokens": n}



def distill_codec(cfg: dict, teacher, view: LoopCache, batches, val_windows: torch.Tensor, checkpoint_dir,
                  progress: bool = True, heldout=None) -> dict:
    """Train view.codec; `batches(step)` -> (batch_size, >= seq_len) token rows of that step.
    `heldout(distiller)`, optional: the selection measurement (default: teacher-forced KL on
    `val_windows`). Returns {"codec_state" (best held-out KL), "best", "curve"}."""
    engine = Engine(CodecDistiller(teacher, view, cfg["lambda_attn"]), cfg)
    distiller = engine.module
    measure = (lambda: heldout(distiller)) if heldout is not None else (
        lambda: heldout_match(distiller, val_windows, cfg["batch_size"]))
    result = train_stage(engine, cfg, batches, measure, lambda: distiller.codec.state_dict(), checkpoint_dir,
                         progress, desc="distill")
    return {"codec_state": result["state"], "best": result["best"], "curve": result["curve"]}
