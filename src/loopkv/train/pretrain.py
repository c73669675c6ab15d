"""Pretrain the tiny looped teacher from scratch (embedded default only; paper scale loads a real
checkpoint). The family's recipe (train/teacher_recipes.py) builds the model and computes each
batch's loss and the held-out measurement; this loop is the same for every family.

Resumable: a checkpoint (model, optimizer, step, curve) is written every `checkpoint_every`
steps; rerunning continues from it. Batches and the lr are functions of the step, so a resumed
run computes the same updates as an uninterrupted one (bitwise on CPU). Each held-out measurement
and checkpoint is a line of the job's log (train/step_log.py).
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from loopkv.data.encoding import encode_text, load_task_examples
from loopkv.data.tokenizer import load_tokenizer
from loopkv.data.windows import Mixture, heldout_windows
from loopkv.errors import LoopKVError
from loopkv.train.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from loopkv.train.schedule import warmup_cosine
from loopkv.train.step_log import StepLog
from loopkv.train.teacher_recipes import TeacherRecipe, teacher_recipe
from loopkv.utils.checked_io import check_state_dict
from loopkv.utils.device import place
from loopkv.utils.seeding import derive_seed, seed_everything

# what a pretraining checkpoint holds (written below), checked before resuming from it
CHECKPOINT_FIELDS = {"step": int, "model": dict, "optimizer": {"state": dict, "param_groups": list},
                     "curve": {"train": list, "val": list}, "torch_rng": torch.Tensor}
log = logging.getLogger(__name__)


def _optimizer(model, cfg, recipe: TeacherRecipe):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if recipe.decays(name, p) else no_decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8,
    )


def pretrain(cfg: dict, arch: dict, dtype: str, seed: int, corpus_dir, tokenizer_dir, task_dirs: dict,
             out_dir, checkpoint_dir, progress: bool = True, device: str | torch.device = "cpu") -> dict:
    """Train on `device`; write the model (save_pretrained + tokenizer) into out_dir. Returns the curve."""
    seed_everything(derive_seed(seed, "teacher-init"))
    tokenizer = load_tokenizer(tokenizer_dir)
    corpus_ids = encode_text(tokenizer, Path(corpus_dir, "train.txt").read_text())
    val_ids = encode_text(tokenizer, Path(corpus_dir, "val.txt").read_text())
    tasks = load_task_examples(tokenizer, task_dirs)
    mixture = Mixture(corpus_ids, tasks, cfg["mixture"], cfg["seq_len"], tokenizer.eos_token_id,
                      derive_seed(seed, "teacher-data"))
    val_windows = heldout_windows(val_ids, cfg["seq_len"], cfg["eval_batches"] * cfg["batch_size"])

    recipe = teacher_recipe(arch)
    # initialised on the CPU (the same weights whatever the device), then moved
    model = place(recipe.model(arch, tokenizer, dtype).to(getattr(torch, dtype)), device)
    optimizer = _optimizer(model, cfg, recipe)
    steps = cfg["steps"]
    lines = StepLog(log, "teacher", steps)
    state = load_checkpoint(checkpoint_dir, CHECKPOINT_FIELDS)
    start, curve = 0, {"train": [], "val": []}
    if state is not None:
        source = f"training checkpoint {Path(checkpoint_dir) / CHECKPOINT_NAME}"
        check_state_dict(state["model"], model, f"{source}: model")
        model.load_state_dict(state["model"])
        try:
            optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as e:
            raise LoopKVError(f"{source}: its optimizer state does not fit this model ({type(e).__name__}: {e}); "
                              "delete it to restart training from scratch") from e
        start, curve = state["step"], state["curve"]
        torch.set_rng_state(state["torch_rng"])
        lines.resumed(start, source, curve["val"][-1] if curve["val"] else None)

    model.train()
    tokens_per_step = cfg["batch_size"] * cfg["seq_len"]
    # log lines drawn above the bar rather than through it
    with logging_redirect_tqdm() if progress else nullcontext():
        bar = tqdm(range(start, steps), initial=start, total=steps, desc="teacher", disable=not progress)
        for step in bar:
            t0 = time.perf_counter()
            lr = cfg["lr"] * warmup_cosine(step, steps, cfg["warmup_steps"], cfg["min_lr_ratio"])
            for group in optimizer.param_groups:
                group["lr"] = lr
            rows = mixture.batch(step, cfg["batch_size"]).to(device)
            loss, diagnostics = recipe.loss(model, rows, step, cfg, seed)
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value):  # stop before a NaN reaches the weights or a checkpoint
                raise FloatingPointError(f"teacher loss is {loss_value} at step {step}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
            optimizer.step()
            dt = time.perf_counter() - t0
            curve["train"].append({"step": step + 1, "loss": loss_value, **diagnostics, "lr": lr,
                                   "grad_norm": float(grad_norm), "tokens_per_s": tokens_per_step / dt})
            lines.step(loss_value, tokens_per_step, dt)
            bar.set_postfix(loss=f"{diagnostics[recipe.progress_key]:.3f}", tok_s=f"{tokens_per_step / dt:.0f}")
            done = step + 1
            evaluate = done % cfg["eval_every"] == 0 or done == steps
            save = done % cfg["checkpoint_every"] == 0 or done == steps
            point = saved_to = None
            if evaluate:
                point = {"step": done, **recipe.heldout(model, val_windows, cfg["batch_size"])}
                curve["val"].append(point)
            if save:
                saved_to = save_checkpoint(checkpoint_dir, {
                    "step": done, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "curve": curve, "torch_rng": torch.get_rng_state(),
                })
            if evaluate or save:
                lines.report(done, point, saved_to)
        bar.close()
    model.to("cpu").save_pretrained(out_dir)   # written from host memory, as on any device
    tokenizer.save_pretrained(out_dir)
    return curve
