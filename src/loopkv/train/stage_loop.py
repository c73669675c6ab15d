"""The step loop every post-training stage shares (codec distillation, MELT stage 1 and 2).

Batches, the learning rate and any per-step knob (MELT's alpha) are functions of the step, so a
run resumed from a DeepSpeed checkpoint computes the same updates as an uninterrupted one. A
held-out measurement every `eval_every` steps (step 0 = the initialisation) picks the best state by
its "kl"; that state, not the last one, is what the stage returns. Each measurement and checkpoint
is a line of the job's log (train/step_log.py).
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import nullcontext
from typing import Callable

import torch
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from loopkv.train.engine import Engine
from loopkv.train.schedule import warmup_cosine
from loopkv.train.step_log import StepLog
from loopkv.utils.checked_io import check_fields

log = logging.getLogger(__name__)
# the client state every checkpoint of a stage holds (saved at the end of the loop below)
CLIENT_STATE_FIELDS = {"step": int, "curve": {"train": list, "heldout": list},
                       "best": {"kl": (int, float), "state": dict}, "torch_rng": torch.Tensor}


def host_copy(state: dict) -> dict:
    """A copy of a state dict in host memory: the best state kept aside costs no accelerator memory
    (a MELT student at 1.4B is 2.8 GB) and is saved without device tensors."""
    return {k: v.detach().to("cpu", copy=True) if torch.is_tensor(v) else v for k, v in state.items()}


def train_stage(engine: Engine, cfg: dict, batches: Callable[[int], torch.Tensor], heldout: Callable[[], dict],
                trained_state: Callable[[], dict], checkpoint_dir, progress: bool = True, desc: str = "train",
                before_step: Callable[[int], dict] | None = None) -> dict:
    """cfg: steps, seq_len, lr, warmup_steps, min_lr_ratio, eval_every, checkpoint_every.
    batches(step) -> (batch_size, >= seq_len) rows (or a tuple of such tensors, passed on); heldout() -> {"kl", ...} of the current state;
    trained_state() -> the state dict worth keeping; before_step(step) sets per-step knobs and
    returns them for the curve. Returns {"state" (best held-out kl), "best", "curve"}."""
    steps, seq_len = cfg["steps"], cfg["seq_len"]
    lines = StepLog(log, desc, steps, enabled=engine.rank == 0)   # the global batch's numbers: one rank says them
    state = engine.load(checkpoint_dir)
    if state is not None:
        check_fields(state, CLIENT_STATE_FIELDS, f"DeepSpeed checkpoint in {checkpoint_dir}",
                     "not a loopkv training checkpoint; delete it to restart")
        start, curve, best = state["step"], state["curve"], state["best"]
        torch.set_rng_state(state["torch_rng"])
        # what was restored vs what the interrupted run saved (its last row's fingerprint)
        restored = engine.state_fingerprint()
        saved = curve["train"][-1].get("fingerprint") if curve["train"] else None
        curve.setdefault("resumes", []).append({"step": start, "fingerprint": restored,
                                                "matches_saved": saved is None or restored == saved})
        if saved is not None and restored != saved:
            log.warning("%s: the state restored at step %d differs from the one saved (%s vs %s)",
                        desc, start, restored, saved)
        lines.resumed(start, f"DeepSpeed checkpoint in {checkpoint_dir}", curve["heldout"][-1] if curve["heldout"] else None)
    else:
        start, curve = 0, {"train": [], "heldout": []}
        first = {"step": 0, **heldout()}
        curve["heldout"].append(first)
        best = {**first, "state": host_copy(trained_state())}
        lines.report(0, first)

    # log lines drawn above the bar rather than through it
    with logging_redirect_tqdm() if progress else nullcontext():
        bar = tqdm(range(start, steps), initial=start, total=steps, desc=desc, disable=not progress)
        for step in bar:
            t0 = time.perf_counter()
            knobs = before_step(step) if before_step is not None else {}
            lr = cfg["lr"] * warmup_cosine(step, steps, cfg["warmup_steps"], cfg["min_lr_ratio"])
            batch = batches(step)   # token rows, or a tuple of per-row tensors (rows, loss weights)
            parts = batch if isinstance(batch, tuple) else (batch,)
            terms = engine(*(part[engine.rank::engine.world_size, :seq_len] for part in parts))
            loss = float(terms["loss"].detach())
            if not math.isfinite(loss):  # stop before a NaN reaches the weights or a checkpoint
                raise FloatingPointError(f"{desc} loss is {loss} at step {step}")
            grad_norm = engine.step(terms["loss"], lr)
            # the curve records the global batch: each rank saw rows[rank::world]
            logged = engine.mean_over_ranks({k: float(v.detach()) for k, v in terms.items()})
            loss = logged.pop("loss")
            seconds = time.perf_counter() - t0
            curve["train"].append({"step": step + 1, "loss": loss, **logged, **knobs, "lr": lr,
                                   "grad_norm": grad_norm, "seconds": seconds})
            lines.step(loss, parts[0][:, :seq_len].numel(), seconds)
            bar.set_postfix({k: f"{v:.4f}" for k, v in logged.items()})
            done = step + 1
            evaluate = done % cfg["eval_every"] == 0 or done == steps
            save = done % cfg["checkpoint_every"] == 0 or done == steps
            point = saved_to = None
            if evaluate:
                point = {"step": done, **heldout()}
                curve["heldout"].append(point)
                if point["kl"] < best["kl"]:
                    best = {**point, "state": host_copy(trained_state())}
            if save:
                curve["train"][-1]["fingerprint"] = engine.state_fingerprint()
                saved_to = engine.save(checkpoint_dir, done, {"step": done, "curve": curve, "best": best,
                                                              "torch_rng": torch.get_rng_state()})
            if evaluate or save:
                lines.report(done, point, saved_to)
        bar.close()
    best = dict(best)
    return {"state": best.pop("state"), "best": best, "curve": curve}
