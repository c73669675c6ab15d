"""How closely a KV method reproduces the teacher: KL(p_teacher || p_method) and top-1 agreement of
the final-loop next-token distributions on held-out windows, with the method's logits produced by
streaming decode through its own cache (token by token, as served) and the teacher's by one exact
forward. Position 0 is excluded: it has no past, so every method is exact there.

The per-token measure, distribution_match, is also the KL the distillation stages train on
(train/distill.py, train/melt.py)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from loopkv.eval.generation import CacheFactory, streamed_logits
from loopkv.utils.device import model_device
from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws


def distribution_match(teacher_logits: torch.Tensor, student_logits: torch.Tensor) -> dict:
    """Per token: KL(p_teacher || p_student) in nats and whether the argmaxes agree.
    Both (B, L, V); returns (B, L) tensors `kl` and `top1`."""
    t = torch.log_softmax(teacher_logits.float(), dim=-1)
    s = torch.log_softmax(student_logits.float(), dim=-1)
    kl = (t.exp() * (t - s)).sum(-1)
    return {"kl": kl, "top1": (teacher_logits.argmax(-1) == student_logits.argmax(-1)).float()}


@torch.no_grad()
def teacher_fidelity(model, windows: torch.Tensor, batch_size: int, cache_factory: CacheFactory,
                     student=None) -> dict:
    """`model` is the teacher; the method runs on `student` (a model variant such as MELT) or on
    the teacher's own weights. A random start (Huginn's) is drawn once, the same for the teacher, the
    method and every method measured: the KL is the method's alone, paired across methods."""
    student = model if student is None else student
    model.eval()
    student.eval()
    kl, top1, nll = [], [], {"teacher": [], "method": []}
    with fixed_draws(MEASUREMENT_SEED, model_device(model)):
        for i in range(0, len(windows), batch_size):
            rows = windows[i:i + batch_size].to(model_device(model))
            # the teacher and the method from the same start (Huginn's initial state, drawn per token)
            run = model.loop_forward_kwargs(rows)
            teacher = model(rows, use_cache=False, **run).logits
            method = streamed_logits(student, rows, cache_factory(), prefill=1, **run)
            match = distribution_match(teacher[:, 1:], method[:, 1:])
            kl.append(match["kl"].flatten())
            top1.append(match["top1"].flatten())
            for name, logits in (("teacher", teacher), ("method", method)):
                # next-token loss at positions 1..L-2 (the last position has no target in the window)
                nll[name].append(F.cross_entropy(logits[:, 1:-1].flatten(0, 1).float(), rows[:, 2:].flatten(),
                                                 reduction="none"))
    kl, top1 = torch.cat(kl), torch.cat(top1)
    return {"kl": float(kl.mean()), "top1": float(top1.mean()), "kl_max_token": float(kl.max()),
            "ce": float(torch.cat(nll["method"]).mean()), "teacher_ce": float(torch.cat(nll["teacher"]).mean()),
            "n_tokens": int(kl.numel()), "n_windows": int(len(windows))}
