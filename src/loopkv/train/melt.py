"""MELT post-training from the looped teacher (MELT paper, Section 4), both stages.

Stage 1: the student's forward is chunk-wise (config.melt_chunk_size: parallel inside a chunk,
sequential across chunks, gradients through the earlier chunks' rows), K/V interpolated towards
the teacher's per-loop K/V with alpha ramping 0 -> 1 over `alpha_ramp_steps` (cache/melt.py), and
the loss is per-loop distillation: the mean over loops t of KL(p_teacher^t || p_student^t).
Stage 2: alpha = 1, the same KD plus layer-wise alignment of attention outputs to the frozen
teacher's, beta * mean_{t,d} MSE(o_MELT^{t,d}, sg(o_teacher^{t,d})) (o = attention output before
o_proj; a mean over elements like LLA's attention term, so beta does not scale with the width;
the paper writes a sum and states no normalisation).

The whole student trains (the paper post-trains all of Ouro); the teacher is frozen. Held-out
selection: final-loop KL to the teacher on validation windows, the student run the way it was
trained (chunk-wise, alpha = 1). Served MELT is sequential (chunk size 1, prompt tokens included):
every token reads its predecessors' final rows, a case the ablation without chunk-wise training
never sees in training.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from loopkv.cache.full import FullLoopCache
from loopkv.cache.melt import MeltCache
from loopkv.cache.teacher_forced import teacher_forced_forward
from loopkv.eval.fidelity import distribution_match
from loopkv.train.engine import Engine
from loopkv.train.stage_loop import train_stage
from loopkv.utils.device import model_device


class MeltDistiller(torch.nn.Module):
    """Frozen teacher + trainable MELT student; forward(ids) -> the stage's loss terms."""

    def __init__(self, teacher, student, beta: float):
        super().__init__()
        self.teacher = teacher.eval().requires_grad_(False)
        self.student = student
        self.beta = beta          # 0: stage 1 (no alignment term)
        self.alpha = 1.0          # set per step by the schedule

    def forward(self, ids: torch.Tensor) -> dict:
        ids = ids.to(model_device(self.teacher))   # batches come from the host
        with torch.no_grad():
            t_out, t_trace = teacher_forced_forward(self.teacher, ids, FullLoopCache(self.teacher.config),
                                                    output_loop_logits=True)
        cache = MeltCache(self.student.config, alpha=self.alpha, record_outputs=self.beta > 0)
        s_out = self.student(ids, cache=cache, use_cache=False, output_loop_logits=True)
        per_loop = [distribution_match(t, s) for t, s in zip(t_out.loop_logits, s_out.loop_logits)]
        kd = torch.stack([m["kl"].mean() for m in per_loop]).mean()
        terms = {"kd": kd, "kl": per_loop[-1]["kl"].mean().detach(), "top1": per_loop[-1]["top1"].mean()}
        loss = kd
        if self.beta > 0:
            attn = torch.stack([F.mse_loss(cache.outputs[key].float(), t_trace.outputs[key].float())
                                for key in t_trace.outputs]).mean()
            loss = loss + self.beta * attn
            terms["attn"] = attn.detach()
        terms["kd"] = kd.detach()
        return {"loss": loss, **terms}


@torch.no_grad()
def heldout_match(distiller: MeltDistiller, windows: torch.Tensor, batch_size: int) -> dict:
    """Final-loop KL and top-1 agreement with the teacher at alpha = 1 (checkpoint selection)."""
    alpha, distiller.alpha = distiller.alpha, 1.0
    was_training = distiller.student.training
    distiller.student.eval()
    kl, top1, n = 0.0, 0.0, 0
    for i in range(0, len(windows), batch_size):
        rows = windows[i:i + batch_size]
        terms = distiller(rows)
        kl += float(terms["kl"]) * rows.numel()
        top1 += float(terms["top1"]) * rows.numel()
        n += rows.numel()
    distiller.alpha = alpha
    distiller.student.train(was_training)
    return {"kl": kl / n, "top1": top1 / n, "n_tokens": n}


def alpha_at(step: int, ramp_steps: int) -> float:
    """Linear 0 -> 1 over ramp_steps (reaching 1 at the last ramp step); 0 ramp steps = MELT from the start."""
    if ramp_steps <= 0:
        return 1.0
    return min(1.0, step / max(1, ramp_steps - 1))


def train_melt_stage(cfg: dict, teacher, student, stage: int, batches, val_windows: torch.Tensor,
                     checkpoint_dir, progress: bool = True) -> dict:
    """cfg: the stage's section (steps, lr, ..., alpha_ramp_steps for stage 1, beta for stage 2).
    Trains `student` in place and returns {"state" (best held-out), "best", "curve"}."""
    if stage not in (1, 2):
        raise ValueError(f"MELT has stages 1 and 2, not {stage}")
    beta = cfg["beta"] if stage == 2 else 0.0
    engine = Engine(MeltDistiller(teacher, student, beta), cfg)
    distiller = engine.module

    def before_step(step: int) -> dict:
        distiller.alpha = alpha_at(step, cfg["alpha_ramp_steps"]) if stage == 1 else 1.0
        return {"alpha": distiller.alpha}

    return train_stage(engine, cfg, batches, lambda: heldout_match(distiller, val_windows, cfg["batch_size"]),
                       lambda: distiller.student.state_dict(), checkpoint_dir, progress,
                       desc=f"melt-stage{stage}", before_step=before_step)
