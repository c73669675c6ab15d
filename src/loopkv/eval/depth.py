"""A teacher's task scores at other test-time depths: the number of recurrence steps a Huginn runs
(its signature: more steps, better answers, up to a point) or the loop an Ouro exits at. Both families
read their depth from config.total_ut_steps at every forward (Huginn's mean_recurrence under loopkv's
name), and their full caches take the count a forward runs, so one mechanism serves both."""
from __future__ import annotations

from contextlib import contextmanager

from loopkv.errors import LoopKVError
from loopkv.eval.quality import evaluate_quality
from loopkv.utils.device import model_device
from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws


@contextmanager
def at_depth(model, steps: int):
    """The model runs `steps` loops (Ouro) / recurrence steps (Huginn) inside; its own count after."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise LoopKVError(f"a test-time depth is a whole number of steps >= 1, got {steps!r}")
    config = model.config
    exits = {k: getattr(config, k) for k in ("exit_at_step", "exit_threshold") if getattr(config, k, None) is not None}
    if exits:   # Ouro's exit settings pick a loop of their own
        raise LoopKVError(f"a test-time depth is the loop the model exits at, but the checkpoint's config sets "
                          f"{exits}, which would choose another")
    own = config.total_ut_steps
    config.total_ut_steps = steps
    try:
        yield model
    finally:
        config.total_ut_steps = own


def quality_by_depth(model, tokenizer, corpus_dir, task_dirs: dict, cfg: dict, depths: list[int]) -> tuple[dict, dict]:
    """({str(depth): the task metrics of evaluate_quality at that depth}, {str(depth): its per-item
    samples}). Each depth's evaluation draws from the measurement seed (Huginn's initial states), batch by
    batch (eval/generation.py), so every depth's batch k starts from the same states."""
    metrics, samples = {}, {}
    for steps in depths:
        with at_depth(model, steps), fixed_draws(MEASUREMENT_SEED, model_device(model)):
            metrics[str(steps)], samples[str(steps)] = evaluate_quality(
                model, tokenizer, corpus_dir, task_dirs, cfg, cfg["seq_len"], heldout=False)
    return metrics, samples
