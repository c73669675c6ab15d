"""One source for each default (issue 21): config/config.yaml states every default, the schema none;
every config is an overlay merged over config/config.yaml as Snakemake merges a --configfile; the
paper config states only what differs; `loopkv config-show` prints the merged result; KV method and
MELT gate names come from their registries. References are plain walks of the files and Snakemake's
own merge (snakemake.utils.update_config), not the code under test."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config as snakemake_update_config

from loopkv import cli
from loopkv.config import (
    DEFAULT_CONFIG_PATH, LM_EVAL_TASK_DEFAULTS, load_config, load_schema, load_workflow_config, validate_config,
)
from loopkv.errors import LoopKVError

ROOT = Path(__file__).resolve().parents[1]
OURO = ROOT / "config" / "ouro-1.4b.yaml"
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
DEFAULT = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())


def schema_leaves(node: dict, path: str = "") -> set[str]:
    """Dotted keys of the schema's named keys that hold a value (a label-keyed mapping is one value)."""
    out = set()
    for key, sub in node.get("properties", {}).items():
        where = f"{path}.{key}" if path else key
        out |= schema_leaves(sub, where) if "properties" in sub else {where}
    return out


def file_leaves(value, node: dict | None, path: str = "") -> dict[str, object]:
    """{dotted key: value} of a config file's values, walked as the schema names them (a key the schema
    does not name is a leaf too, so that it shows up in a comparison)."""
    if not (isinstance(value, dict) and node is not None and "properties" in node):
        return {path: value}
    out: dict[str, object] = {}
    for key, sub in value.items():
        out.update(file_leaves(sub, node["properties"].get(key), f"{path}.{key}" if path else key))
    return out


def snakemake_merged(*overlays: dict) -> dict:
    """What Snakemake's `config` is for `--configfile OVERLAYS` (Workflow.configfile: a copy of the
    overwrite config, the Snakefile's configfile merged into it, the overwrite config on top)."""
    overwrite: dict = {}
    for overlay in overlays:
        snakemake_update_config(overwrite, copy.deepcopy(overlay))
    config = copy.deepcopy(overwrite)
    snakemake_update_config(config, copy.deepcopy(DEFAULT))
    snakemake_update_config(config, copy.deepcopy(overwrite))
    return config


# ---------------------------------------------------------------- config/config.yaml, the schema


def test_the_schema_states_no_default():
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            found.extend(f"{where}.default" for key in node if key == "default")
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(SCHEMA, "schema")
    assert not found, found


def test_every_schema_key_has_a_value_in_config_yaml_and_back():
    in_schema, in_file = schema_leaves(SCHEMA), set(file_leaves(DEFAULT, SCHEMA))
    assert in_schema - in_file == set(), "keys of the schema without a default in config/config.yaml"
    assert in_file - in_schema == set(), "keys of config/config.yaml the schema does not describe"
    assert len(in_schema) > 150   # the walk reaches every section


def test_config_yaml_itself_validates():
    validate_config(copy.deepcopy(DEFAULT), base_dir=ROOT)


def test_the_empty_config_is_config_yaml():
    assert json.dumps(load_config({})) == json.dumps(load_config(DEFAULT_CONFIG_PATH)) == json.dumps(DEFAULT)


def test_a_partial_config_takes_the_rest_from_config_yaml_as_snakemake_merges():
    partial = {"teacher": {"lr": 1.0e-3, "mixture": {"corpus": 1.0}}, "methods": {"budgets": {"8x": 8.0}},
               "passkey_grid": {"lengths": [64, 128]}, "model": {"arch": {"head_dim": 16}}}
    before = copy.deepcopy(partial)
    loaded = load_config(partial)
    assert partial == before
    assert json.dumps(loaded) == json.dumps(snakemake_merged(partial))   # key order included
    # spelled out: a mapping keeps the default's other keys, labels included (the file's first); a list is replaced
    assert loaded["teacher"]["mixture"] == {"corpus": 1.0, "passkey": 0.3, "arithmetic": 0.4}
    assert list(loaded["methods"]["budgets"]) == ["8x", "4x", "5.33x", "21.33x", "1.33x", "2x", "2.67x", "3.2x"]
    assert loaded["passkey_grid"]["lengths"] == [64, 128]
    assert loaded["model"]["arch"]["hidden_size"] == DEFAULT["model"]["arch"]["hidden_size"]


@pytest.mark.parametrize("files", [[], ["tests/workflow/micro.yaml"], ["config/ouro-1.4b.yaml"],
                                   ["config/ouro-1.4b.yaml", "tests/workflow/paper_cpu.yaml"]])
def test_a_complete_config_comes_back_unchanged(files):
    """The Snakefile hands load_config the config Snakemake merged: completing it adds only a task entry's
    left-out keys (micro.yaml leaves some out), and completing the result again changes nothing."""
    merged = snakemake_merged(*(yaml.safe_load((ROOT / f).read_text()) for f in files))
    complete = load_config(merged, check_paths=False)
    assert json.dumps(load_config(complete, check_paths=False)) == json.dumps(complete)
    whole = {"name", *LM_EVAL_TASK_DEFAULTS}
    merged["lm_eval"]["tasks"] = [{**t, **{k: v for k, v in complete["lm_eval"]["tasks"][i].items() if k not in t}}
                                  for i, t in enumerate(merged["lm_eval"]["tasks"])]
    assert all(set(t) == whole for t in merged["lm_eval"]["tasks"])
    assert json.dumps(complete) == json.dumps(merged)


def test_a_task_entry_takes_its_left_out_keys():
    tasks = load_config({"lm_eval": {"tasks": [{"name": "passkey"}, {"shards": 2, "name": "gsm8k", "max_docs": 4}]}})
    assert [list(t.items()) for t in tasks["lm_eval"]["tasks"]] == [
        [("name", "passkey"), ("max_docs", None), ("max_docs_per_group", None), ("shards", 1), ("max_gen_toks", None),
         ("shots", None), ("variant", None), ("sampling", None)],
        [("shards", 2), ("name", "gsm8k"), ("max_docs", 4), ("max_docs_per_group", None), ("max_gen_toks", None),
         ("shots", None), ("variant", None), ("sampling", None)]]
    assert set(LM_EVAL_TASK_DEFAULTS) == set(SCHEMA["properties"]["lm_eval"]["properties"]["tasks"]["items"]
                                             ["properties"]) - {"name"}


# ---------------------------------------------------------------- overlays


def test_the_paper_config_states_only_what_differs():
    """Every value config/ouro-1.4b.yaml states is a key of config/config.yaml with another value (a list
    or a label-keyed mapping is one value: methods.table1 is restated whole to keep its order of labels)."""
    stated, defaults = file_leaves(yaml.safe_load(OURO.read_text()), SCHEMA), file_leaves(DEFAULT, SCHEMA)
    assert set(stated) <= set(defaults), set(stated) - set(defaults)
    same = [key for key, value in stated.items() if value == defaults[key]]
    assert same == [], f"restates the default: {same}"


def test_the_paper_config_is_its_overlay_merged_as_snakemake_merges():
    expected = snakemake_merged(yaml.safe_load(OURO.read_text()))
    assert json.dumps(load_config(OURO, check_paths=False)) == json.dumps(expected)
    assert json.dumps(load_workflow_config([OURO], check_paths=False, base_dir=ROOT)) == json.dumps(expected)


def test_the_paper_config_keeps_its_paper_scale_values():
    """Values the overlay relies on the default for, and the orders tables follow (Table 1's budgets,
    MELT's recipes, the serving models): as the paper config stated them in full before (issue 21)."""
    cfg = load_config(OURO, check_paths=False)
    arch = cfg["model"]["arch"]
    assert (arch["num_hidden_layers"], arch["total_ut_steps"], arch["num_attention_heads"], arch["head_dim"],
            arch["hidden_size"], arch["rms_norm_eps"]) == (24, 4, 16, 128, 2048, 1.0e-6)
    assert cfg["seed"] == 1234 and cfg["data"]["corpus"]["sources"] == ["shakespeare"]
    assert cfg["methods"]["budgets"] == {"1.33x": 1.333333, "2x": 2.0, "2.67x": 2.666667, "3.2x": 3.2, "4x": 4.0,
                                         "5.33x": 5.333333, "10.67x": 10.666667, "14.2x": 14.222222,
                                         "15.5x": 15.515152, "21.33x": 21.333333}   # every ratio the paper reports
    assert cfg["methods"]["rank_sweep"] == ["1.33x", "2x", "2.67x", "3.2x", "4x"]   # Table 8's
    assert cfg["methods"]["table1_benchmarks"]["mc_avg"] == ["arc_easy", "arc_challenge", "hellaswag", "piqa",
                                                             "winogrande", "boolq"]
    assert list(cfg["methods"]["table1"].items()) == [("4x", ["final_loop", "lla", "mla_head", "cla", "kv_quant"]),
                                                      ("5.33x", ["lla", "mla_head", "kv_quant"]),
                                                      ("21.33x", ["lla", "mla_head"])]
    assert list(cfg["melt"]["ablations"]) == ["gate_single", "gate_mean", "gate_ema", "gate_last", "no_chunk",
                                              "no_interp", "no_stage2"]
    assert list(cfg["serve"]["paper"]["models"]) == ["ouro-1.4b", "ouro-2.6b"]
    assert [t["name"] for t in cfg["lm_eval"]["tasks"]][-1] == "boolq" and len(cfg["lm_eval"]["tasks"]) == 14
    # BBH both ways: the source tasks' multiple choice, and the paper's 3-shot generated exact match (<= 1024
    # tokens) on 25 items a subtask (LLA's 675 = 27 x 25)
    assert [(t["shots"], t["max_gen_toks"], t["max_docs"], t["max_docs_per_group"])
            for t in cfg["lm_eval"]["tasks"] if t["name"] == "bbh_gen"] == [(3, 1024, None, 25)]
    # MATH-500 greedy, and sampled as MELT evaluates beside it (issue 22)
    assert [(t["variant"], t["sampling"]) for t in cfg["lm_eval"]["tasks"] if t["name"] == "math500"] == [
        (None, None), ("sampled", {"temperature": 1.0, "top_p": 0.7, "samples": 4})]
    assert cfg["melt"]["stage1"] == {"steps": 2000, "lr": 1.0e-5, "warmup_steps": 100, "alpha_ramp_steps": 1000,
                                     "min_lr_ratio": 0.1}


@pytest.mark.parametrize("files", [["tests/workflow/micro.yaml"],
                                   ["tests/workflow/micro.yaml", "tests/workflow/lazy_device.yaml"],
                                   ["config/ouro-1.4b.yaml", "tests/workflow/paper_cpu.yaml"],
                                   ["config/ouro-1.4b.yaml", "benchmarks/gpu_smoke.yaml"]])
def test_the_test_overlays_load_as_snakemake_merges_them(files):
    loaded = load_workflow_config(files, check_paths=False, base_dir=ROOT)
    assert loaded == load_config(snakemake_merged(*(yaml.safe_load((ROOT / f).read_text()) for f in files)),
                                 check_paths=False)
    if files[0].endswith("micro.yaml"):   # a default label emptied, not removed
        assert loaded["methods"]["table1"]["5.33x"] == [] and "5.33x" in loaded["methods"]["budgets"]


# ---------------------------------------------------------------- names from the registries


def test_gate_names_come_from_the_registry(monkeypatch):
    from loopkv.models import melt_gate

    raw = {"melt": {"gate": "gru", "ablations": {"gate_gru": {"gate": "gru"}}}}
    with pytest.raises(LoopKVError) as refused:
        load_config(raw)
    assert str(refused.value).splitlines() == [
        f"config key 'melt.gate': must be one of {', '.join(melt_gate.VARIANTS)}; got string 'gru'",
        f"config key 'melt.ablations.gate_gru.gate': must be one of {', '.join(melt_gate.VARIANTS)}; got string 'gru'"]
    monkeypatch.setattr(melt_gate, "VARIANTS", (*melt_gate.VARIANTS, "gru"))   # a gate added there alone
    assert load_config(raw)["melt"]["gate"] == "gru"


def test_method_names_come_from_the_registry(monkeypatch):
    from loopkv.cache import registry

    known = registry.budgeted_methods()
    monkeypatch.setattr(registry, "budgeted_methods", lambda: tuple(m for m in known if m != "cla"))
    with pytest.raises(LoopKVError) as refused:
        load_config({})
    first = str(refused.value).splitlines()[0]
    assert first.startswith("config key 'methods.table1.4x[3]': must be one of ") and "got string 'cla'" in first


# ---------------------------------------------------------------- loopkv config-show


@pytest.fixture
def config_cli(monkeypatch, capsys):
    """cli.main with only the config commands, in the repository root: (exit status, stdout, stderr)."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("loopkv.config_commands",))
    monkeypatch.chdir(ROOT)

    def run(argv):
        code = cli.main(argv)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.mark.parametrize("argv, files, config_args", [
    (["tests/workflow/micro.yaml"], ["tests/workflow/micro.yaml"], []),
    (["config/ouro-1.4b.yaml", "tests/workflow/paper_cpu.yaml", "--no-paths"],
     ["config/ouro-1.4b.yaml", "tests/workflow/paper_cpu.yaml"], []),
    (["--config", "seed=7"], [], ["seed=7"]),
])
def test_config_show_prints_the_merged_config(config_cli, argv, files, config_args):
    code, out, err = config_cli(["config-show", *argv])
    assert code == 0, err
    shown = yaml.safe_load(out)
    expected = load_workflow_config(files, config_args, check_paths=False)
    assert shown == expected
    # keys in schema order; a label-keyed mapping and a list in their own (the tables') order
    assert list(shown) == list(SCHEMA["properties"])
    assert list(shown["launch"]) == list(SCHEMA["properties"]["launch"]["properties"])
    assert list(shown["methods"]["budgets"]) == list(expected["methods"]["budgets"])
    assert list(shown["lm_eval"]["tasks"][0]) == ["name", "max_docs", "max_docs_per_group", "shards", "max_gen_toks",
                                                  "shots", "variant", "sampling"]


def test_config_show_names_the_key_of_an_invalid_config(config_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("teacher: {lr: -1}\n")
    code, out, err = config_cli(["config-show", str(bad)])
    assert (code, out) == (2, "")
    assert "config key 'teacher.lr': must be > 0, got -1" in err
