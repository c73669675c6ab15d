"""Job declarations (loopkv.jobs): every command a rule calls states the config keys it reads; its
slice is built from that alone, never holds a resource key, and the command can read nothing else."""
import json
import pickle
from pathlib import Path

import pytest

from loopkv.cache.registry import METHODS
from loopkv.cli import build_parser
from loopkv.config import DEFAULT_CONFIG_PATH, decoupled_variants, load_config, load_workflow_config, melt_budget_label
from loopkv.errors import LoopKVError
from loopkv.jobs.declared import job_spec, job_specs
from loopkv.jobs.views import ABLATION_SECTIONS
from loopkv.jobs.runner import SliceRead
from loopkv.jobs.slices import job_slice

MICRO = Path(__file__).parent / "workflow" / "micro.yaml"


def configs():
    return {"default": load_config(DEFAULT_CONFIG_PATH, check_paths=False),
            "micro": load_workflow_config([MICRO], check_paths=False)}


def wildcard_sets(command: str, cfg: dict):
    """Every (method, budget) a job of `command` can run at, with the other wildcards it may name."""
    task = {"data-task": "passkey", "lm-eval-shard": cfg["lm_eval"]["tasks"][0]["name"]}.get(command, "passkey")
    budgets = list(cfg["methods"]["budgets"])
    for method in METHODS:
        if command == "distill-ablation" and method not in ABLATION_SECTIONS:
            continue   # variants are distilled of these methods only (the command refuses others)
        budget = "1x" if method == "full" else melt_budget_label(cfg) if method == "melt" else budgets[0]
        variant = (decoupled_variants(cfg) or ["none"])[0] if method == "lla_decoupled" else "full"
        for stage in (1, 2):
            yield {"method": method, "budget": budget, "task": task, "recipe": "full", "variant": variant, "stage": stage,
                   "which": 3 + stage - 1, "shard": 0, "shards": 1}


def leaves(node, path=()):
    """(path, value) of every leaf of a nested mapping, walked independently of loopkv.jobs."""
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, (*path, str(k)))
    else:
        yield path, node


def resource_paths(cfg):
    """Every threads key and every launch key of a config: what sizes a job, never what it computes."""
    return [p for p, _ in leaves(cfg) if p[0] == "launch" or p[-1] == "threads"]


def all_slices(cfg):
    return {(command, json.dumps(w, sort_keys=True)): job_slice(spec, cfg, w)
            for command, spec in job_specs().items() for w in wildcard_sets(command, cfg)}


def set_leaf(cfg, path, value):
    node = cfg
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


@pytest.mark.parametrize("name", ["default", "micro"])
def test_no_slice_holds_a_resource_key(name):
    cfg = configs()[name]
    assert len(resource_paths(cfg)) >= 10   # threads of every stage and the launch section
    for key, sliced in all_slices(cfg).items():
        held = [p for p, _ in leaves(sliced) if p and (p[0] == "launch" or p[-1] == "threads")]
        assert held == [], (key, held)


def test_editing_any_resource_key_changes_no_slice():
    cfg = configs()["micro"]
    before = all_slices(cfg)
    for path in resource_paths(cfg):
        edited = json.loads(json.dumps(cfg))
        value = dict(leaves(cfg))[path]
        set_leaf(edited, path, (value + 1) if isinstance(value, int) and not isinstance(value, bool) else "edited")
        assert all_slices(edited) == before, path


def test_a_slice_holds_exactly_the_declared_keys():
    cfg = configs()["default"]
    teacher = job_slice(job_spec("teacher-pretrain"), cfg, {})
    expected_teacher = {k: v for k, v in cfg["teacher"].items() if k != "threads"}
    assert teacher == {"seed": cfg["seed"], "teacher": expected_teacher,
                       "model": {"arch": cfg["model"]["arch"], "dtype": cfg["model"]["dtype"]}}
    # a codec cell: its own section, its one budget, and kv_quant's group only where kv_quant runs
    lla = job_slice(job_spec("distill"), cfg, {"method": "lla", "budget": "4x"})
    assert lla["methods"] == {"budgets": {"4x": cfg["methods"]["budgets"]["4x"]},
                              "cache_dtype": cfg["methods"]["cache_dtype"], "k_share": cfg["methods"]["k_share"]}
    quant = job_slice(job_spec("method-eval"), cfg, {"method": "kv_quant", "budget": "4x"})
    assert quant["methods"]["kv_quant_group"] == cfg["methods"]["kv_quant_group"]
    served = job_slice(job_spec("method-eval"), cfg, {"method": "lla", "budget": "4x"})
    assert served["methods"]["read_path"] == cfg["methods"]["read_path"]   # evaluated through a read path
    teacher_cell = job_slice(job_spec("method-eval"), cfg, {"method": "full", "budget": "1x"})
    assert teacher_cell["methods"]["budgets"] == {} and "read_path" not in teacher_cell["methods"]
    kernel = job_slice(job_spec("kernel-bench"), cfg, {})
    assert "measured" not in kernel["serve"]["kernel"] and kernel["serve"]["kernel"]["contexts"]


def test_a_key_a_view_writes_over_is_declared_as_read_through_the_view():
    """methods.query_adapter is a plain read of lla_decoupled's jobs, but Table 14's distill-ablation
    job gets its variant's value there (a View): an edit of it may rerun that job, not must (micro's
    one variant sets its own). A View a job does not read leaves its key out of the slice."""
    from loopkv.jobs.slices import declared_paths

    cfg = configs()["micro"]
    spec, wildcards = job_spec("distill-ablation"), {"method": "lla_decoupled", "budget": "4x", "variant": "adapter"}
    plain, viewed = declared_paths(spec, cfg, wildcards)
    for key in (("methods", "query_adapter"), ("methods", "rope_share"), ("methods", "k_share")):
        assert key not in plain and key in viewed, key
    edited = json.loads(json.dumps(cfg))
    edited["methods"]["query_adapter"] = not cfg["methods"]["query_adapter"]
    assert job_slice(spec, edited, wildcards) == job_slice(spec, cfg, wildcards)   # the variant's own value
    recipe = job_slice(spec, cfg, {"method": "lla", "budget": "4x", "variant": "full"})
    assert not {"query_adapter", "rope_share"} & set(recipe["methods"])


def test_every_registered_method_can_be_sliced_at_a_budget():
    cfg = configs()["micro"]
    for w in wildcard_sets("method-eval", cfg):
        sliced = job_slice(job_spec("method-eval"), cfg, w)
        assert set(sliced) == {"seed", "method_eval", "model", "methods"}, w


def test_a_declared_key_the_config_lacks_is_an_error_naming_it():
    spec = job_spec("distill")
    with pytest.raises(LoopKVError, match=r"methods\.budgets\.9x"):
        job_slice(spec, configs()["micro"], {"method": "lla", "budget": "9x"})


def test_a_read_of_an_undeclared_key_fails_naming_it():
    cfg = SliceRead({"seed": 1, "melt": {"gate": "full", "extra": {"a": 1}}}, "melt-train")
    with pytest.raises(LoopKVError, match=r"melt-train read config key 'model'"):
        cfg["model"]
    with pytest.raises(LoopKVError, match=r"read config key 'melt.ema_decay'"):
        cfg["melt"].get("ema_decay", 0.5)     # a real config key: .get's default would hide the read
    assert cfg["melt"].get("stage", 1) == 1   # a view's optional entry, not a config key
    assert cfg["melt"]["extra"]["a"] == 1
    plain = pickle.loads(pickle.dumps(cfg))   # saved (torch.save) as plain dicts
    assert type(plain) is dict and type(plain["melt"]) is dict and plain == cfg


def test_each_command_takes_the_flags_its_declaration_lists():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for command, spec in job_specs().items():
        flags = {opt for action in sub[command]._actions for opt in action.option_strings}
        assert ("--cfg" in flags) == bool(spec.reads), command
        assert ("--threads" in flags) == bool(spec.threads), command
        assert ("--device" in flags) == spec.device, command
        for arg in (*spec.inputs, *spec.outputs, *spec.wildcards):
            assert arg.positional or f"--{arg.name}" in flags, (command, arg.name)
        assert "--seed" not in flags, command   # the seed is a config key of the slice


def test_a_budget_label_with_a_dot_is_one_key():
    cfg = configs()["default"]
    assert "5.33x" in cfg["methods"]["budgets"]
    sliced = job_slice(job_spec("method-eval"), cfg, {"method": "kv_quant", "budget": "5.33x"})
    assert sliced["methods"]["budgets"] == {"5.33x": cfg["methods"]["budgets"]["5.33x"]}


def test_a_sampled_variant_has_a_slice_of_its_own_and_leaves_the_greedy_runs_alone():
    """An lm_eval.tasks entry listed a second time with a variant (issue 22) is its own job (task id
    gsm8k-sampled); adding it changes no other job's slice, and its own holds its sampling settings."""
    spec = job_spec("lm-eval-shard")
    base = load_config({}, check_paths=False)
    wildcards = {"method": "full", "budget": "1x", "task": "gsm8k", "shard": 0, "shards": 2}
    before = job_slice(spec, base, wildcards)
    sampling = {"temperature": 1.0, "top_p": 0.7, "samples": 4}
    tasks = [*base["lm_eval"]["tasks"], {"name": "gsm8k", "variant": "sampled", "max_docs": 32, "sampling": sampling}]
    cfg = load_config({"lm_eval": {"tasks": tasks}}, check_paths=False)
    assert job_slice(spec, cfg, wildcards) == before
    assert job_slice(spec, cfg, {**wildcards, "task": "gsm8k-sampled"})["lm_eval"]["tasks"] == {
        "gsm8k-sampled": {"max_docs": 32, "sampling": sampling}}
    with pytest.raises(LoopKVError, match="no task 'gsm8k-greedy'"):
        job_slice(spec, cfg, {**wildcards, "task": "gsm8k-greedy"})


def test_a_per_group_cap_enters_its_tasks_shard_slice_and_null_keeps_the_old_one():
    """max_docs_per_group (LLA's BBH: 25 a subtask) reruns that task's shards, and only theirs; left
    null (the default) the slice is the one a config without the key had, so nothing reruns."""
    spec = job_spec("lm-eval-shard")
    wildcards = {"method": "full", "budget": "1x", "task": "bbh_gen", "shard": 0, "shards": 4}
    tasks = [{"name": "gsm8k", "max_docs": 8}, {"name": "bbh_gen", "shots": 3, "max_gen_toks": 64}]
    before = load_config({"lm_eval": {"tasks": tasks}}, check_paths=False)
    assert job_slice(spec, before, wildcards)["lm_eval"]["tasks"] == {"bbh_gen": {"max_gen_toks": 64, "shots": 3}}
    explicit = load_config({"lm_eval": {"tasks": [tasks[0], {**tasks[1], "max_docs_per_group": None}]}}, check_paths=False)
    assert job_slice(spec, explicit, wildcards) == job_slice(spec, before, wildcards)
    capped = load_config({"lm_eval": {"tasks": [tasks[0], {**tasks[1], "max_docs_per_group": 25}]}}, check_paths=False)
    assert job_slice(spec, capped, wildcards)["lm_eval"]["tasks"] == {
        "bbh_gen": {"max_docs_per_group": 25, "max_gen_toks": 64, "shots": 3}}
    gsm8k = {**wildcards, "task": "gsm8k", "shards": 1}
    assert job_slice(spec, capped, gsm8k) == job_slice(spec, before, gsm8k)
