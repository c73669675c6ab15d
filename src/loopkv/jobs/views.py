"""Slice entries computed from the config (spec.View): settings a job reads that are not one
config key, kept as narrow as what the job uses so that editing a neighbour's key reruns nothing."""
from __future__ import annotations

from typing import Mapping

from loopkv.errors import LoopKVError
from loopkv.jobs.spec import NOT_READ


# arch keys only one family's teacher reads
OURO_ONLY_ARCH = ("sublayer_norm_init",)


def teacher_arch(config: Mapping, **_) -> dict:
    """model.arch as the teacher's pretraining reads it: an Ouro run's is model.arch itself (the slice
    it had before Huginn, so nothing reruns); a Huginn run's adds the family and model.huginn's keys
    and leaves out Ouro's own."""
    model = config["model"]
    if model.get("family", "ouro") == "ouro":
        return dict(model["arch"])
    arch = {k: v for k, v in model["arch"].items() if k not in OURO_ONLY_ARCH}
    return {"family": model["family"], **arch, **model["huginn"]}


def melt_stage(config: Mapping, recipe: str, stage: int | str, **_) -> dict:
    """One MELT recipe's stage settings: recipes with equal settings share one job."""
    from loopkv.train.melt_recipes import stage_cfg

    return stage_cfg(config["melt"], recipe, int(stage))


def method_eval(config: Mapping, method: str, **_) -> dict:
    """method_eval's settings; a MELT recipe's evaluation is batched at melt.eval_batch_size."""
    if method == "melt":
        return {**config["method_eval"], "batch_size": config["melt"]["eval_batch_size"]}
    return dict(config["method_eval"])


def lm_eval_task(config: Mapping, task: str, **_) -> dict:
    """One lm-eval task's settings, {task id: settings}: its shard count, name and variant are in the
    output's name and a None setting means the task's own default (greedy decoding included), so none
    of them enters the slice. `task` is the entry's id (lm_tasks.task_id: name, or name-variant)."""
    from loopkv.eval.lm_tasks import task_id

    if task == "passkey_grid":
        return {task: {}}
    entries = [t for t in config["lm_eval"]["tasks"] if task_id(t["name"], t.get("variant")) == task]
    if not entries:
        raise LoopKVError(f"lm_eval.tasks has no task {task!r}")
    # shots 0 is zero-shot, as null is: a config that never sets it keeps the slice it had; a sampling
    # seed left out or null is the derived one
    settings = {k: v for k, v in entries[0].items()
                if k not in ("shards", "name", "variant") and v is not None and not (k == "shots" and v == 0)}
    if "sampling" in settings:
        settings["sampling"] = {k: v for k, v in settings["sampling"].items() if v is not None}
    return {task: settings}


def melt_table(config: Mapping, which: int | str, **_) -> list:
    """MELT Table 3 or 4's recipes, [name, recipe keys] in table order (ema_decay only where the ema
    gate reads it, so editing it redraws only the table that has that recipe)."""
    from loopkv.models.melt_gate import gate_variant
    from loopkv.train.melt_recipes import recipe, table_members

    rows = []
    for name in table_members(config["melt"], int(which)):
        r = recipe(config["melt"], name)
        reads = gate_variant(r["gate"]).reads_ema_decay
        rows.append([name, {k: v for k, v in r.items() if k != "ema_decay" or reads}])
    return rows


# the codec method of each table of variants distilled on Table 10's short schedule -> its variants' section
ABLATION_SECTIONS = {"lla": "distill_ablations", "lla_decoupled": "decoupled_rope"}


def _ablation_change(config: Mapping, method: str, variant: str) -> dict:
    section = ABLATION_SECTIONS.get(method)
    if section is None:
        raise LoopKVError(f"no table distils variants of {method!r} (those of: {', '.join(ABLATION_SECTIONS)})")
    change = config[section]["variants"].get(variant)
    if change is None:
        raise LoopKVError(f"{section}.variants has no variant {variant!r}")
    return change


def distill_ablation(config: Mapping, variant: str, method: str = "lla", **_) -> dict:
    """One variant's distillation settings (LLA Table 10's, or Table 14's for lla_decoupled): distill.*
    on the short schedule (distill_ablations.steps / eval_every, times the variant's steps_factor; the
    warm-up capped at the steps), its lambda_attn, and its codec init (svd unless it says otherwise)."""
    change = _ablation_change(config, method, variant)
    ablations = config["distill_ablations"]
    steps = ablations["steps"] * change.get("steps_factor", 1)
    recipe = dict(config["distill"])
    recipe.update(steps=steps, eval_every=ablations["eval_every"],
                  checkpoint_every=ablations["eval_every"], warmup_steps=min(recipe["warmup_steps"], steps))
    recipe["lambda_attn"] = change.get("lambda_attn", recipe["lambda_attn"])
    recipe["init"] = change.get("init", "svd")
    return recipe


def distill_ablation_k_share(config: Mapping, variant: str, method: str = "lla", **_) -> float:
    """K's share of the latent budget of one variant (methods.k_share unless it says otherwise)."""
    return _ablation_change(config, method, variant).get("k_share", config["methods"]["k_share"])


def _decoupled_key(config: Mapping, method: str, variant: str, key: str):
    """methods.<key> as a Table 14 variant sets it (config.decoupled_methods); not read by other methods."""
    from loopkv.config import decoupled_methods

    if method not in METHOD_KEYS_OF_VARIANTS:
        return NOT_READ
    return decoupled_methods(config, _ablation_change(config, method, variant))[key]


def distill_ablation_rope_share(config: Mapping, variant: str, method: str = "lla", **_):
    """A Table 14 variant's rope share (methods.rope_share unless it says otherwise)."""
    return _decoupled_key(config, method, variant, "rope_share")


def distill_ablation_query_adapter(config: Mapping, variant: str, method: str = "lla", **_):
    """A Table 14 variant's query adapter (methods.query_adapter unless it says otherwise)."""
    return _decoupled_key(config, method, variant, "query_adapter")


METHOD_KEYS_OF_VARIANTS = ("lla_decoupled",)   # methods whose variants set rope_share / query_adapter
