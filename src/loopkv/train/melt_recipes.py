"""MELT recipes: the full recipe of config section `melt` and its ablations (MELT Tables 3 and 4).

A recipe is the five keys that define how a MELT model is built and trained; an ablation overrides
some of them. Each training stage gets only the keys it depends on, so two recipes that share a
stage (the full recipe and "no_stage2" share stage 1) share that stage's job and result.
"""
from __future__ import annotations

from loopkv.errors import LoopKVError
from loopkv.models.melt_gate import TABLE3_ORDER, gate_variant

FULL = "full"
RECIPE_KEYS = ("gate", "ema_decay", "chunk_size", "interpolation", "align_stage")
TRAINING_KEYS = ("batch_size", "seq_len", "weight_decay", "grad_clip", "zero_stage", "eval_every",
                 "eval_samples", "checkpoint_every", "mixture")


def recipe_names(melt_cfg: dict) -> list[str]:
    return [FULL, *melt_cfg["ablations"]]


def recipe(melt_cfg: dict, name: str) -> dict:
    """The five recipe keys of `name` (the full recipe, or it with the ablation's overrides)."""
    base = {key: melt_cfg[key] for key in RECIPE_KEYS}
    if name == FULL:
        return base
    if name not in melt_cfg["ablations"]:
        raise LoopKVError(f"unknown MELT recipe {name!r} (known: {', '.join(recipe_names(melt_cfg))})")
    overrides = melt_cfg["ablations"][name]
    unknown = sorted(set(overrides) - set(RECIPE_KEYS))
    if unknown:
        raise LoopKVError(f"config key 'melt.ablations.{name}': unknown keys {unknown} (recipe keys: {RECIPE_KEYS})")
    return {**base, **overrides}


def stage_cfg(melt_cfg: dict, name: str, stage: int) -> dict:
    """Everything stage `stage` of recipe `name` depends on, and nothing else."""
    r = recipe(melt_cfg, name)
    model = {key: r[key] for key in ("gate", "ema_decay", "chunk_size")}
    if not gate_variant(r["gate"]).reads_ema_decay:
        model.pop("ema_decay")    # only the ema gate reads it
    schedule = dict(melt_cfg[f"stage{stage}"])
    if stage == 1 and not r["interpolation"]:
        schedule["alpha_ramp_steps"] = 0
    own = {**model, **{key: melt_cfg[key] for key in TRAINING_KEYS}, **schedule, "stage": stage}
    if stage == 2:   # stage 2 starts from stage 1's result, so it depends on all of stage 1
        own["init"] = stage_cfg(melt_cfg, name, 1)
    return own


def final_stage(melt_cfg: dict, name: str) -> int:
    return 2 if recipe(melt_cfg, name)["align_stage"] else 1


def stage_owner(melt_cfg: dict, name: str, stage: int) -> str:
    """The first recipe (full first) whose stage job equals this one's: its result is shared."""
    mine = stage_cfg(melt_cfg, name, stage)
    for other in recipe_names(melt_cfg):
        if stage_cfg(melt_cfg, other, stage) == mine:
            return other
    return name


GATE_ORDER = TABLE3_ORDER   # the paper's Table 3 order, best first (models/melt_gate.py GATES)


def table_members(melt_cfg: dict, which: int) -> list[str]:
    """Recipes of MELT Table 3 (the full recipe and ablations that change only the gate, in the
    paper's gate order) or Table 4 (the full recipe and ablations that keep its gate)."""
    full = recipe(melt_cfg, FULL)

    def rest(r):
        return {k: v for k, v in r.items() if k not in ("gate", "ema_decay")}

    names = recipe_names(melt_cfg)
    if which == 3:
        members = [n for n in names if n == FULL or (rest(recipe(melt_cfg, n)) == rest(full)
                                                     and recipe(melt_cfg, n)["gate"] != full["gate"])]
        return sorted(members, key=lambda n: GATE_ORDER.index(recipe(melt_cfg, n)["gate"]))
    if which == 4:
        return [n for n in names if n == FULL or (recipe(melt_cfg, n)["gate"] == full["gate"]
                                                  and recipe(melt_cfg, n) != full)]
    raise ValueError(f"MELT has tables 3 and 4, not {which}")
