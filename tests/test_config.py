"""Config schema, defaults, cross-key checks and `loopkv config-check`."""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loopkv import cli, config_commands
from loopkv.config import (
    DEFAULT_CONFIG_PATH, SCHEMA_PATH, complete_config, config_slice, load_config, load_schema,
    validate_config,
)
from loopkv.errors import LoopKVError

ROOT = Path(__file__).resolve().parents[1]
OURO = ROOT / "config" / "ouro-1.4b.yaml"
DEFAULT_VALUES = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())


def _set(cfg: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        cfg = cfg.setdefault(part, {})
    cfg[last] = value


# ---------------------------------------------------------------- valid configs and defaults


def test_paths_point_into_the_repo():
    assert SCHEMA_PATH == ROOT / "workflow" / "schemas" / "config.schema.yaml"
    assert DEFAULT_CONFIG_PATH == ROOT / "config" / "config.yaml"


def test_default_config_is_valid_and_complete():
    assert load_config(DEFAULT_CONFIG_PATH) == DEFAULT_VALUES


def test_empty_config_is_the_default_config():
    assert load_config({}) == DEFAULT_VALUES


def test_only_seed_becomes_full_default():
    expected = copy.deepcopy(DEFAULT_VALUES)
    expected["seed"] = 7
    assert load_config({"seed": 7}) == expected


def test_partial_section_is_filled_and_input_untouched():
    raw = {"teacher": {"lr": 1.0e-3}, "model": {"arch": {"head_dim": 16}}}
    before = copy.deepcopy(raw)
    cfg = load_config(raw)
    assert raw == before
    assert cfg["teacher"]["lr"] == 1.0e-3
    assert cfg["teacher"]["steps"] == DEFAULT_VALUES["teacher"]["steps"]
    assert cfg["model"]["arch"]["head_dim"] == 16
    assert cfg["model"]["arch"]["hidden_size"] == DEFAULT_VALUES["model"]["arch"]["hidden_size"]


def test_partial_mixture_keeps_the_default_weights_as_in_a_run():
    """One merge everywhere: a dict given to load_config means what the same --configfile means."""
    cfg = load_config({"teacher": {"mixture": {"corpus": 1.0}}})
    assert cfg["teacher"]["mixture"] == {"corpus": 1.0, **{k: DEFAULT_VALUES["teacher"]["mixture"][k]
                                                           for k in ("passkey", "arithmetic")}}


def test_empty_yaml_file_means_all_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing\n")
    assert load_config(path) == DEFAULT_VALUES


def test_ouro_config_is_valid_without_path_checks():
    cfg = load_config(OURO, check_paths=False)
    arch = cfg["model"]["arch"]
    assert (arch["num_hidden_layers"], arch["total_ut_steps"], arch["num_attention_heads"],
            arch["head_dim"], arch["hidden_size"], arch["intermediate_size"]) == (24, 4, 16, 128, 2048, 5632)
    assert cfg["data"]["tokenizer"]["vocab_size"] == 49152
    assert arch["rope_theta"] == 1.0e6
    assert cfg["model"]["dtype"] == "bfloat16"
    assert arch["rms_norm_eps"] == 1.0e-6 and cfg["seed"] == 1234   # left out: config/config.yaml's


def test_ouro_config_needs_the_checkpoint(tmp_path):
    with pytest.raises(LoopKVError, match=r"^config key 'model\.path': checkpoint directory does not exist"):
        load_config(OURO, base_dir=tmp_path)


def test_ouro_config_passes_once_checkpoint_and_bigbench_sdist_are_there(tmp_path, bigbench_sdist):
    (tmp_path / "checkpoints" / "Ouro-1.4B").mkdir(parents=True)
    (tmp_path / "checkpoints" / "Ouro-1.4B" / "config.json").write_text("{}")
    with pytest.raises(LoopKVError, match=r"'data\.bigbench_sdist': BIG-bench sdist .* does not exist: .*downloads/bigbench"):
        load_config(OURO, base_dir=tmp_path)
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "bigbench-1.0.0.tar.gz").write_bytes(bigbench_sdist.read_bytes())
    load_config(OURO, base_dir=tmp_path)


def test_schema_conventions():
    """Every key documented with type/description (its default is config/config.yaml's: see
    test_config_defaults.py); every object closed, label maps' entries included (typed, no free-form
    mapping anywhere); every integer bounded above, the bound stated in its description; every list's
    items typed."""
    schema = load_schema()
    from loopkv.config import _Validator
    _Validator.check_schema(schema)
    bounded = []

    def walk(node: dict, where: str, entry: bool = False) -> None:
        types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if "object" in types:
            if isinstance(node.get("additionalProperties"), dict):   # a map keyed by labels
                assert "properties" not in node and "description" in node, where
                assert node.get("propertyNames", {}).get("type") == "string", f"{where}: label keys must be text"
                walk(node["additionalProperties"], f"{where}.<label>", entry=True)
                return
            assert node.get("additionalProperties") is False, where
            assert "properties" in node, f"{where}: an object without typed keys"
            for key, sub in node["properties"].items():
                for field in ("type", "description"):
                    assert field in sub, f"{where}.{key} has no {field}"
                walk(sub, f"{where}.{key}".lstrip("."), entry)
        if "array" in types:
            assert isinstance(node.get("items"), dict) and "type" in node["items"], f"{where}: untyped items"
            walk(node["items"], f"{where}[]", entry)
        if "integer" in types and "enum" not in node:
            assert "maximum" in node, f"{where}: an integer without an upper bound"
            bounded.append(where)

    walk(schema, "")
    assert len(bounded) > 100
    # documented: each top-level key's description states its bound (items' bounds: their list's)
    def described(node, where):
        for key, sub in node.get("properties", {}).items():
            if "maximum" in sub and "integer" in str(sub.get("type")) and "enum" not in sub:
                text = sub["description"]
                assert f"{sub['maximum']:,}" in text or f"{sub['maximum']}" in text, f"{where}{key}: bound not described"
            described(sub, f"{where}{key}.")
    described(schema, "")


def test_schema_names_match_the_registries():
    """Names the schema lists itself must be the registries' (the MELT recipes, the layouts, the
    sources); KV method and gate names it does not list (config.py checks them against the registries)."""
    from loopkv.cache.registry import METHODS
    from loopkv.models.configuration_ouro import OuroConfig
    from loopkv.models.melt_gate import VARIANTS
    from loopkv.train.melt_recipes import RECIPE_KEYS

    props = load_schema()["properties"]
    enums = []

    def walk(node):
        if isinstance(node, dict):
            enums.extend(node.get("enum", []) if isinstance(node.get("enum"), list) else [])
            for value in node.values():
                walk(value)

    walk(load_schema())
    names = (set(METHODS) | set(VARIANTS)) - {"full"}   # "full" is also a read path (methods.read_path)
    assert not set(enums) & names, set(enums) & names
    ablation = props["melt"]["properties"]["ablations"]["additionalProperties"]["properties"]
    assert tuple(ablation) == RECIPE_KEYS
    paper_model = props["serve"]["properties"]["paper"]["properties"]["models"]["additionalProperties"]
    assert set(paper_model["properties"]) <= set(OuroConfig.__annotations__)
    from loopkv.cache.latent_codec import LAYOUTS
    assert set(props["calibration"]["properties"]["layouts"]["items"]["enum"]) == set(LAYOUTS)
    from loopkv.data.sources import KNOWN_SOURCES
    corpus = props["data"]["properties"]["corpus"]["properties"]
    assert set(corpus["sources"]["items"]["enum"]) == set(KNOWN_SOURCES)


def test_paper_scale_fits_the_bounds():
    """The bounds admit paper scale with headroom: Ouro-2.6B's depth, 8 GPUs, 64k-token passkey prompts,
    the 262144-token kernel context, MELT's 32k-token memory curve, a 1M-token Table 5 context."""
    raw = load_config(OURO, check_paths=False)
    raw["model"]["arch"].update(num_hidden_layers=48, max_position_embeddings=1048576)
    raw["passkey_grid"]["lengths"] = [2048, 65536, 262144]
    raw["serve"]["kernel"]["contexts"] = [262144, 1048576]
    raw["serve"]["paper"]["context"] = 1048576
    raw["melt"]["memory_lengths"] = [32768, 131072]
    raw["melt"]["seq_len"] = raw["teacher_eval"]["seq_len"] = 32768
    raw["lm_eval"]["tasks"][0].update(max_gen_toks=32768, shards=64)
    raw["launch"].update(ranks=8, gpus=8)
    load_config(raw, check_paths=False)


@pytest.mark.parametrize("edit, key, says", [
    ({"methods.k_share": float("nan")}, "methods.k_share", "must be a finite number, got .nan"),
    ({"teacher.lr": float("inf")}, "teacher.lr", "must be a finite number, got .inf"),
    ({"teacher.lr": True}, "teacher.lr", "true/false is not a number here"),
    ({"teacher.batch_size": 10**9}, "teacher.batch_size", "must be <= 4096, got 1000000000 (the upper bound"),
    ({"serve.batch_sizes": [1, 8, 8]}, "serve.batch_sizes", "(8 more than once)"),
    ({"methods.budgets": {"4x": 4.0, "four": 4.0}}, "methods.budgets.four", "has the ratio of '4x'"),
    ({"serve.kernel.r_v": 1000}, "serve.kernel.r_v", "must be <= T x serve.kernel.head_dim (4 x 128 = 512)"),
    ({"passkey_grid.lengths": list(range(16, 16 + 65))}, "passkey_grid.lengths", "at most 64 items, got 65"),
])
def test_new_checks_say_what_is_wrong(edit, key, says):
    cfg = copy.deepcopy(DEFAULT_VALUES)
    for dotted, value in edit.items():
        _set(cfg, dotted, value)
    with pytest.raises(LoopKVError) as info:
        load_config(cfg, check_paths=False)
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"config key '{key}': ") and says in first, first


def test_results_dirs_are_checked_only_with_paths(tmp_path):
    (tmp_path / "file").write_text("x")
    raw = {"results_dir": "file/results", "reports_dir": "file", "logs_dir": "new/logs", "serve": {"kernel": {"measured": []}}}
    with pytest.raises(LoopKVError) as info:
        load_config(raw, base_dir=tmp_path)
    assert str(info.value).splitlines() == [
        f"config key 'results_dir': cannot be created: {tmp_path}/file/results is below {tmp_path}/file, which is a file",
        f"config key 'reports_dir': must be a directory, but {tmp_path}/file is a file"]
    load_config(raw, check_paths=False)   # a library caller elsewhere (a job's cwd) is not judged by this one


def test_schema_works_with_snakemake_validate():
    """Snakemake's own validate() accepts the complete config and, the schema stating no defaults, adds
    nothing to a partial one (config/config.yaml, the Snakefile's configfile, is the defaults)."""
    snake_utils = pytest.importorskip("snakemake.utils")
    cfg = load_config({"seed": 3})
    snake_utils.validate(cfg, str(SCHEMA_PATH))
    assert cfg == load_config({"seed": 3})
    partial = {"seed": 3}
    snake_utils.validate(partial, str(SCHEMA_PATH))
    assert partial == {"seed": 3}


# ---------------------------------------------------------------- malformed configs

# (id, {dotted key: new value}, key the error must name). Placeholders: {tmp} = a temp directory.
BAD_CASES = [
    ("seed-string", {"seed": "1234"}, "seed"),
    ("steps-float", {"teacher.steps": 1100.5}, "teacher.steps"),
    ("steps-integral-float", {"teacher.steps": 1100.0}, "teacher.steps"),
    ("threads-bool", {"teacher.threads": True}, "teacher.threads"),
    ("corpus-list-not-dict", {"data.corpus": ["shakespeare"]}, "data.corpus"),
    ("arch-string-not-dict", {"model.arch": "tiny"}, "model.arch"),
    ("lengths-not-list", {"data.tasks.passkey.eval_lengths": 64}, "data.tasks.passkey.eval_lengths"),
    ("lr-null", {"teacher.lr": None}, "teacher.lr"),
    ("lr-yaml-string", {"teacher.lr": "3e-3"}, "teacher.lr"),
    ("unknown-top-level", {"seeds": 1}, "seeds"),
    ("unknown-nested", {"teacher.lrr": 0.1}, "teacher.lrr"),
    ("unknown-deep", {"model.arch.num_kv_heads": 4}, "model.arch.num_kv_heads"),
    ("negative-examples", {"data.tasks.passkey.train_examples": -5}, "data.tasks.passkey.train_examples"),
    ("negative-length-item", {"data.tasks.passkey.train_lengths": [64, -1]},
     "data.tasks.passkey.train_lengths[1]"),
    ("empty-lengths", {"data.tasks.passkey.eval_lengths": []}, "data.tasks.passkey.eval_lengths"),
    ("zero-batch", {"teacher.batch_size": 0}, "teacher.batch_size"),
    ("negative-lr", {"teacher.lr": -1}, "teacher.lr"),
    ("zero-lr", {"teacher.lr": 0.0}, "teacher.lr"),
    ("min-lr-ratio-above-1", {"teacher.min_lr_ratio": 1.5}, "teacher.min_lr_ratio"),
    ("warmup-over-steps", {"teacher.warmup_steps": 2000}, "teacher.warmup_steps"),
    ("fraction-is-1", {"data.corpus.test_fraction": 1.0}, "data.corpus.test_fraction"),
    ("fraction-negative", {"data.corpus.val_fraction": -0.1}, "data.corpus.val_fraction"),
    ("fractions-sum-1", {"data.corpus.val_fraction": 0.5, "data.corpus.test_fraction": 0.5},
     "data.corpus.val_fraction"),
    ("no-corpus-text", {"data.corpus.sources": []}, "data.corpus.sources"),
    ("duplicate-source", {"data.corpus.sources": ["shakespeare", "shakespeare"]}, "data.corpus.sources"),
    ("min-steps-over-max", {"data.tasks.arithmetic.min_steps": 5}, "data.tasks.arithmetic.min_steps"),
    ("operand-over-value", {"data.tasks.arithmetic.max_operand": 100}, "data.tasks.arithmetic.max_operand"),
    ("one-choice", {"data.tasks.cloze.num_choices": 1}, "data.tasks.cloze.num_choices"),
    ("bad-model-source", {"model.source": "huggingface"}, "model.source"),
    ("bad-dtype", {"model.dtype": "fp16"}, "model.dtype"),
    ("bad-tokenizer-kind", {"data.tokenizer.kind": "wordpiece"}, "data.tokenizer.kind"),
    ("bad-corpus-source", {"data.corpus.sources": ["wikipedia"]}, "data.corpus.sources[0]"),
    ("passkey-train-over-seq-len", {"data.tasks.passkey.train_lengths": [64, 300]},
     "data.tasks.passkey.train_lengths"),
    ("passkey-eval-over-max-pos", {"data.tasks.passkey.eval_lengths": [64, 2048]},
     "data.tasks.passkey.eval_lengths"),
    ("seq-len-over-max-pos", {"teacher.seq_len": 2048}, "teacher.seq_len"),
    ("eval-seq-len-over-max-pos", {"teacher_eval.seq_len": 4096}, "teacher_eval.seq_len"),
    ("odd-head-dim", {"model.arch.head_dim": 33}, "model.arch.head_dim"),
    ("zero-rope-theta", {"model.arch.rope_theta": 0}, "model.arch.rope_theta"),
    ("vocab-too-small", {"data.tokenizer.vocab_size": 258}, "data.tokenizer.vocab_size"),
    ("mixture-unknown-key", {"teacher.mixture": {"corpus": 1.0, "cloze": 0.5}}, "teacher.mixture.cloze"),
    ("mixture-negative", {"teacher.mixture.passkey": -0.2}, "teacher.mixture.passkey"),
    ("mixture-all-zero", {"teacher.mixture": {"corpus": 0, "passkey": 0, "arithmetic": 0}},
     "teacher.mixture"),
    ("mixture-not-dict", {"teacher.mixture": [0.5, 0.5]}, "teacher.mixture"),
    ("pretrained-without-path",
     {"model.source": "pretrained", "data.tokenizer.kind": "pretrained", "data.tokenizer.path": "{tmp}"},
     "model.path"),
    ("pretrained-model-bpe-tokenizer", {"model.source": "pretrained", "model.path": "{tmp}/ckpt"},
     "data.tokenizer.kind"),
    ("model-path-missing", {"model.path": "{tmp}/nope"}, "model.path"),
    ("model-path-no-config-json", {"model.path": "{tmp}"}, "model.path"),
    ("model-path-empty-string", {"model.path": ""}, "model.path"),
    ("text-file-missing", {"data.corpus.text_files": ["{tmp}/missing.txt"]}, "data.corpus.text_files[0]"),
    ("kernel-result-missing", {"serve.kernel.measured": ["{tmp}/missing.json"]}, "serve.kernel.measured[0]"),
    ("tokenizer-pretrained-without-path", {"data.tokenizer.kind": "pretrained"}, "data.tokenizer.path"),
    ("tokenizer-path-missing", {"data.tokenizer.path": "{tmp}/no-tokenizer"}, "data.tokenizer.path"),
    ("calibration-unknown-layout", {"calibration.layouts": ["per_token"]}, "calibration.layouts[0]"),
    ("calibration-zero-mixture", {"calibration.mixture": {"corpus": 0, "passkey": 0, "arithmetic": 0}},
     "calibration.mixture"),
    ("calibration-rows-too-short-for-passkey", {"calibration.seq_len": 64}, "calibration.seq_len"),
    ("calibration-longer-than-positions", {"calibration.seq_len": 4096}, "calibration.seq_len"),
    ("report-dpi-too-low", {"report.dpi": 10}, "report.dpi"),
    ("kv-quant-group-zero", {"methods.kv_quant_group": 0}, "methods.kv_quant_group"),
    ("serve-unknown-budget", {"serve.budgets": ["4x", "8x"]}, "serve.budgets[1]"),
    ("serve-latency-budget-unknown", {"serve.latency_budget": "3x"}, "serve.latency_budget"),
    ("serve-odd-kernel-head-dim", {"serve.kernel.head_dim": 127}, "serve.kernel.head_dim"),
    ("serve-zero-batch", {"serve.batch_sizes": [0]}, "serve.batch_sizes[0]"),
    ("launch-zero-ranks", {"launch.ranks": 0}, "launch.ranks"),
    ("launch-negative-gpus", {"launch.gpus": -1}, "launch.gpus"),
    ("launch-ranks-do-not-divide-batch", {"launch.ranks": 3}, "distill.batch_size"),
    ("table1-unknown-budget", {"methods.table1": {"8x": ["lla"]}}, "methods.table1.8x"),
    ("table1-unreachable-cell", {"methods.table1": {"5.33x": ["cla"]}}, "methods.table1.5.33x"),
    ("table1-unknown-method", {"methods.table1": {"4x": ["h2o"]}}, "methods.table1.4x[0]"),
    ("budget-ratio-below-1", {"methods.budgets": {"4x": 0.5}}, "methods.budgets.4x"),
    ("k-share-is-1", {"methods.k_share": 1.0}, "methods.k_share"),
    ("bad-read-path", {"methods.read_path": "absorbed"}, "methods.read_path"),
    ("distill-warmup-over-steps", {"distill.warmup_steps": 1000}, "distill.warmup_steps"),
    ("distill-longer-than-positions", {"distill.seq_len": 4096}, "distill.seq_len"),
    ("distill-zero-mixture", {"distill.mixture": {"corpus": 0, "passkey": 0, "arithmetic": 0}}, "distill.mixture"),
    ("distill-rows-too-short-for-passkey", {"distill.seq_len": 64}, "distill.seq_len"),
    ("distill-zero-stage-3", {"distill.zero_stage": 3}, "distill.zero_stage"),
    ("codec-without-calibration-moments", {"calibration.layouts": ["per_head", "per_loop"]}, "methods.table1.5.33x"),
    ("method-eval-zero-windows", {"method_eval.kl_windows": 0}, "method_eval.kl_windows"),
    ("melt-unknown-gate", {"melt.gate": "gru"}, "melt.gate"),
    ("melt-ablation-unknown-gate", {"melt.ablations": {"x": {"gate": "lstm"}}}, "melt.ablations.x.gate"),
    ("melt-ablation-unknown-key", {"melt.ablations": {"x": {"lr": 0.1}}}, "melt.ablations.x.lr"),
    ("melt-ablation-named-full", {"melt.ablations": {"full": {"gate": "mean"}}}, "melt.ablations.full"),
    ("melt-ablation-chunk-zero", {"melt.ablations": {"x": {"chunk_size": 0}}}, "melt.ablations.x.chunk_size"),
    ("melt-zero-chunk", {"melt.chunk_size": 0}, "melt.chunk_size"),
    ("melt-ramp-over-steps", {"melt.stage1.alpha_ramp_steps": 1000}, "melt.stage1.alpha_ramp_steps"),
    ("melt-stage2-warmup-over-steps", {"melt.stage2.warmup_steps": 1000}, "melt.stage2.warmup_steps"),
    ("melt-rows-too-short-for-passkey", {"melt.seq_len": 64}, "melt.seq_len"),
    ("melt-compare-unknown-method", {"melt.compare_methods": ["h2o"]}, "melt.compare_methods"),
    # T = 3 and no 3x label (a default label cannot be removed); no Table 1 cell, which T = 3 would bar
    ("melt-without-its-budget", {"model.arch.total_ut_steps": 3,
                                 "methods.table1": {"4x": [], "5.33x": [], "21.33x": []}}, "methods.budgets"),
    ("melt-in-table1", {"methods.table1": {"4x": ["melt"]}}, "methods.table1.4x[0]"),
    # the evaluation suite, the passkey grid, on-policy distillation
    ("lm-eval-unknown-benchmark", {"lm_eval.tasks": [{"name": "mmlu_pro"}]}, "lm_eval.tasks[0].name"),
    ("lm-eval-task-twice", {"lm_eval.tasks": [{"name": "gsm8k"}, {"name": "gsm8k"}]}, "lm_eval.tasks[1].name"),
    ("lm-eval-zero-shards", {"lm_eval.tasks": [{"name": "gsm8k", "shards": 0}]}, "lm_eval.tasks[0].shards"),
    ("lm-eval-negative-docs", {"lm_eval.tasks": [{"name": "gsm8k", "max_docs": -5}]}, "lm_eval.tasks[0].max_docs"),
    ("lm-eval-task-typo-key", {"lm_eval.tasks": [{"name": "gsm8k", "shard": 2}]}, "lm_eval.tasks[0].shard"),
    ("lm-eval-unknown-method", {"lm_eval.models": ["h2o/4x"]}, "lm_eval.models[0]"),
    ("lm-eval-unknown-budget", {"lm_eval.models": ["lla/3x"]}, "lm_eval.models[0]"),
    ("lm-eval-teacher-at-a-budget", {"lm_eval.models": ["full/4x"]}, "lm_eval.models[0]"),
    ("lm-eval-unreachable-budget", {"lm_eval.models": ["cla/5.33x"]}, "lm_eval.models[0]"),
    ("lm-eval-melt-off-budget", {"lm_eval.models": ["melt/21.33x"]}, "lm_eval.models[0]"),
    ("lm-eval-malformed-model", {"lm_eval.models": ["lla-4x"]}, "lm_eval.models[0]"),
    # sampled decoding (issue 22): bounds, generation tasks only, a variant label, (name, variant) once
    *[(f"lm-eval-sampling-{name}", {"lm_eval.tasks": [{"name": "gsm8k", "variant": "s", "sampling": {
        "temperature": 1.0, "top_p": 0.7, "samples": 4, **edit}}]}, f"lm_eval.tasks[0].sampling.{key}")
      for name, edit, key in [("top-p-above-one", {"top_p": 1.5}, "top_p"), ("top-p-zero", {"top_p": 0.0}, "top_p"),
                              ("zero-temperature", {"temperature": 0.0}, "temperature"),
                              ("no-samples", {"samples": 0}, "samples"), ("typo", {"topp": 0.7}, "topp"),
                              ("negative-seed", {"seed": -1}, "seed")]],
    ("lm-eval-sampling-incomplete", {"lm_eval.tasks": [{"name": "gsm8k", "variant": "s", "sampling": {
        "temperature": 1.0, "samples": 4}}]}, "lm_eval.tasks[0].sampling.top_p"),
    ("lm-eval-sampling-multiple-choice", {"lm_eval.tasks": [{"name": "mmlu", "variant": "s", "sampling": {
        "temperature": 1.0, "top_p": 0.7, "samples": 4}}]}, "lm_eval.tasks[0].sampling"),
    ("lm-eval-sampling-without-variant", {"lm_eval.tasks": [{"name": "gsm8k", "sampling": {
        "temperature": 1.0, "top_p": 0.7, "samples": 4}}]}, "lm_eval.tasks[0].variant"),
    # Table 1's real-benchmark columns (issue 22): a configured greedy task of the column's own kind
    ("table1-benchmark-not-a-task", {"methods.table1_benchmarks.gsm8k": "gsm8k",
                                     "lm_eval.tasks": [{"name": "mmlu"}]}, "methods.table1_benchmarks.gsm8k"),
    ("table1-benchmark-wrong-kind", {"methods.table1_benchmarks.mmlu": "arc_easy",
                                     "lm_eval.tasks": [{"name": "arc_easy"}]}, "methods.table1_benchmarks.mmlu"),
    ("table1-benchmark-not-mc", {"methods.table1_benchmarks.mc_avg": ["arc_easy", "gsm8k"],
                                 "lm_eval.tasks": [{"name": "arc_easy"}, {"name": "gsm8k"}]},
     "methods.table1_benchmarks.mc_avg[1]"),
    ("table1-benchmark-only-sampled", {"methods.table1_benchmarks.gsm8k": "gsm8k", "lm_eval.tasks": [
        {"name": "gsm8k", "variant": "s", "sampling": {"temperature": 1.0, "top_p": 0.7, "samples": 2}}]},
     "methods.table1_benchmarks.gsm8k"),
    ("table1-benchmark-typo", {"methods.table1_benchmarks.gsm8K": "gsm8k"}, "methods.table1_benchmarks.gsm8K"),
    ("paper-model-unknown", {"report.paper_model": "Ouro-7B"}, "report.paper_model"),
    ("lm-eval-variant-twice", {"lm_eval.tasks": [{"name": "gsm8k"}, {"name": "gsm8k", "variant": "b"},
                                                 {"name": "gsm8k", "variant": "b"}]}, "lm_eval.tasks[2].variant"),
    ("lm-eval-variant-label", {"lm_eval.tasks": [{"name": "gsm8k", "variant": "greedy_5shot"}]},
     "lm_eval.tasks[0].variant"),
    ("grid-longer-than-positions", {"passkey_grid.lengths": [64, 4096]}, "passkey_grid.lengths"),
    ("grid-depth-above-one", {"passkey_grid.depths": [0.5, 1.5]}, "passkey_grid.depths[1]"),
    ("grid-unknown-model", {"passkey_grid.models": ["snapkv/4x"]}, "passkey_grid.models[0]"),
    ("on-policy-not-a-codec", {"on_policy.method": "kv_quant"}, "on_policy.method"),
    ("on-policy-unknown-budget", {"on_policy.budgets": ["9x"]}, "on_policy.budgets[0]"),
    ("on-policy-negative-temperature", {"on_policy.temperature": -1.0}, "on_policy.temperature"),
    ("on-policy-unknown-prompts", {"on_policy.prompts": ["cloze"]}, "on_policy.prompts[0]"),
]


@pytest.mark.parametrize("edits, key", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_malformed_config_names_the_key(tmp_path, edits, key):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    cfg = copy.deepcopy(DEFAULT_VALUES)
    for dotted, value in edits.items():
        if isinstance(value, str):
            value = value.replace("{tmp}", str(tmp_path))
        _set(cfg, dotted, value)
    with pytest.raises(LoopKVError) as info:
        load_config(cfg)
    assert str(info.value).startswith(f"config key '{key}': "), str(info.value)


def test_bad_case_table_is_large_and_unique():
    assert len(BAD_CASES) >= 24
    assert len({c[0] for c in BAD_CASES}) == len(BAD_CASES)


def test_messages_are_specific():
    def message(edits: dict) -> str:
        cfg = copy.deepcopy(DEFAULT_VALUES)
        for dotted, value in edits.items():
            _set(cfg, dotted, value)
        with pytest.raises(LoopKVError) as info:
            validate_config(cfg)
        return str(info.value)

    assert message({"teacher.lr": -1}) == "config key 'teacher.lr': must be > 0, got -1"
    assert "did you mean 'lr'" in message({"teacher.lrr": 1})
    assert "allowed: corpus, passkey, arithmetic" in message({"teacher.mixture.cloze": 1})
    assert "decimal point" in message({"teacher.lr": "3e-3"})
    assert "must be one of scratch, pretrained" in message({"model.source": "hf"})


def test_a_per_group_sample_is_accepted_on_bbh_gen_and_refused_elsewhere_by_name():
    """max_docs_per_group: bbh_gen's subtasks are its groups; a task without groups, or max_docs beside
    it, is refused naming the key and why."""
    def tasks(*entries):
        return {"lm_eval": {"tasks": list(entries)}}

    cfg = load_config(tasks({"name": "bbh_gen", "max_docs_per_group": 25, "shards": 4}), check_paths=False)
    assert cfg["lm_eval"]["tasks"][0]["max_docs_per_group"] == 25
    assert load_config(tasks({"name": "gsm8k"}), check_paths=False)["lm_eval"]["tasks"][0]["max_docs_per_group"] is None
    with pytest.raises(LoopKVError) as info:
        load_config(tasks({"name": "mmlu", "max_docs_per_group": 5}), check_paths=False)
    assert str(info.value).startswith("config key 'lm_eval.tasks[0].max_docs_per_group': task 'mmlu' has no groups")
    assert "only bbh_gen do" in str(info.value)
    with pytest.raises(LoopKVError, match=r"'lm_eval.tasks\[1\].max_docs_per_group': cannot be combined with max_docs \(50\)"):
        load_config(tasks({"name": "gsm8k"}, {"name": "bbh_gen", "max_docs": 50, "max_docs_per_group": 5}), check_paths=False)
    with pytest.raises(LoopKVError, match=r"'lm_eval.tasks\[0\].max_docs_per_group': must be >= 1"):
        load_config(tasks({"name": "bbh_gen", "max_docs_per_group": 0}), check_paths=False)


def test_all_problems_are_listed_first_one_first():
    cfg = copy.deepcopy(DEFAULT_VALUES)
    _set(cfg, "teacher.batch_size", 0)
    _set(cfg, "teacher.bogus", 1)
    with pytest.raises(LoopKVError) as info:
        validate_config(cfg)
    lines = str(info.value).splitlines()
    assert len(lines) == 2
    assert {line.split(":")[0] for line in lines} == {
        "config key 'teacher.batch_size'", "config key 'teacher.bogus'"}


def test_text_file_that_exists_is_accepted(tmp_path):
    text = tmp_path / "extra.txt"
    text.write_text("hello\n")
    cfg = load_config({"data": {"corpus": {"text_files": [str(text)]}}})
    assert cfg["data"]["corpus"]["text_files"] == [str(text)]


def test_relative_paths_resolve_against_base_dir(tmp_path):
    (tmp_path / "corpus.txt").write_text("x\n")
    (tmp_path / "kernel.json").write_text("{}")
    raw = {"data": {"corpus": {"text_files": ["corpus.txt"]}}, "serve": {"kernel": {"measured": ["kernel.json"]}}}
    load_config(raw, base_dir=tmp_path)
    with pytest.raises(LoopKVError, match="text_files") as error:
        load_config(raw, base_dir=tmp_path / "elsewhere")
    assert "serve.kernel.measured[0]" in str(error.value)


def test_non_mapping_config():
    with pytest.raises(LoopKVError, match=r"^config: must be a mapping"):
        load_config([1, 2])


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(LoopKVError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("teacher: [unclosed\n")
    with pytest.raises(LoopKVError, match="not valid YAML"):
        load_config(bad)


def test_completion_leaves_wrong_types_for_validation():
    out = complete_config({"data": "oops"})
    assert out["data"] == "oops"
    assert out["teacher"]["steps"] == DEFAULT_VALUES["teacher"]["steps"]
    assert complete_config([1, 2]) == [1, 2]


# ---------------------------------------------------------------- config_slice


def test_config_slice():
    cfg = load_config({})
    sl = config_slice(cfg, "data.tokenizer", "teacher.seq_len", "seed")
    assert sl == {"data.tokenizer": DEFAULT_VALUES["data"]["tokenizer"],
                  "teacher.seq_len": DEFAULT_VALUES["teacher"]["seq_len"], "seed": 1234}
    sl["data.tokenizer"]["kind"] = "changed"  # a copy: the config is not affected
    assert cfg["data"]["tokenizer"]["kind"] == "bpe"
    with pytest.raises(LoopKVError, match=r"^config key 'teacher\.nope'"):
        config_slice(cfg, "teacher.nope")
    with pytest.raises(LoopKVError, match=r"^config key 'seed\.x'"):
        config_slice(cfg, "seed.x")


# ---------------------------------------------------------------- CLI


@pytest.fixture
def config_only_cli(monkeypatch):
    """cli.main with only this module's commands, so the test does not depend on other areas."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("loopkv.config_commands",))
    return cli.main


def test_cli_ok(config_only_cli, capsys):
    assert config_only_cli(["config-check", str(DEFAULT_CONFIG_PATH)]) == 0
    assert capsys.readouterr().out.strip() == f"ok: {DEFAULT_CONFIG_PATH}"


def test_cli_bad_file(config_only_cli, capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("teacher:\n  lr: -1\n")
    assert config_only_cli(["config-check", str(bad)]) == 2
    assert "config key 'teacher.lr'" in capsys.readouterr().err


def test_cli_no_paths_flag(config_only_cli, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no checkpoints/ here
    assert config_only_cli(["config-check", str(OURO), "--no-paths"]) == 0
    assert config_only_cli(["config-check", str(OURO)]) == 2
    assert "config key 'model.path'" in capsys.readouterr().err


def test_register_adds_config_check():
    import argparse
    parser = argparse.ArgumentParser()
    config_commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["config-check", "x.yaml", "--no-paths"])
    assert (args.config, args.no_paths, args.func) == (["x.yaml"], True, config_commands.config_check)
    args = parser.parse_args(["config-check", "a.yaml", "--configfile", "b.yaml", "c.yaml", "--config", "seed=1"])
    assert (args.config, args.configfiles, args.config_args) == (["a.yaml"], ["b.yaml", "c.yaml"], ["seed=1"])


def test_cli_merges_over_the_workflow_config_as_snakemake_does(config_only_cli, capsys, monkeypatch, tmp_path):
    """micro.yaml states only what it changes (Snakemake merges it over config/config.yaml): accepted,
    and a mixture written in part keeps the default's other weights, as in the run."""
    monkeypatch.chdir(ROOT)
    assert config_only_cli(["config-check", "tests/workflow/micro.yaml", "--print-config"]) == 0
    out = capsys.readouterr().out
    merged = json.loads(out[out.index("{"):])
    assert merged["methods"]["budgets"] == {"2x": 2.0, "4x": 4.0, "5.33x": 5.333333, "21.33x": 21.333333,
                                            "1.33x": 1.333333, "2.67x": 2.666667, "3.2x": 3.2}
    assert merged["methods"]["rank_sweep"] == ["2x", "4x"]
    part = tmp_path / "part.yaml"
    part.write_text("teacher: {mixture: {corpus: 1.0}}\n")
    assert config_only_cli(["config-check", str(part), "--print-config"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{"):])["teacher"]["mixture"] == {"corpus": 1.0, "passkey": 0.3, "arithmetic": 0.4}
    # elsewhere (no config/config.yaml) the files alone, as Snakemake run there would take them
    monkeypatch.chdir(tmp_path)
    assert config_only_cli(["config-check", str(part), "--no-paths"]) == 0
    assert "note: no config/config.yaml here" in capsys.readouterr().out
    assert config_only_cli(["config-check"]) == 2
    assert "the workflow's config file" in capsys.readouterr().err


def _full_cli_available() -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in cli.COMMAND_MODULES)
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.skipif(not _full_cli_available(), reason="other areas' command modules not written yet")
def test_cli_subprocess(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    ok = subprocess.run([sys.executable, "-m", "loopkv", "config-check", str(DEFAULT_CONFIG_PATH)],
                        capture_output=True, text=True, env=env, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert f"ok: {DEFAULT_CONFIG_PATH}" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  arch:\n    head_dim: 33\n")
    res = subprocess.run([sys.executable, "-m", "loopkv", "config-check", str(bad)],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 2
    assert "config key 'model.arch.head_dim'" in res.stderr


@pytest.mark.parametrize("section,edit,key", [
    ("budget label", {"methods": {"budgets": {"$(touch /tmp/loopkv-pwned)x": 4.0}}}, "methods.budgets"),
    ("budget label", {"methods": {"budgets": {"..": 4.0}}}, "methods.budgets"),
    ("budget label", {"methods": {"budgets": {"4x;id": 4.0}}}, "methods.budgets"),
    ("served pair", {"lm_eval": {"models": ["lla/$(id)"]}}, "lm_eval.models[0]"),
    ("served pair", {"passkey_grid": {"models": ["lla/../../x"]}}, "passkey_grid.models[0]"),
    ("recipe name", {"melt": {"ablations": {"a b;rm": {"gate": "mean"}}}}, "melt.ablations"),
])
def test_names_that_reach_paths_and_command_lines_are_safe(section, edit, key):
    """Labels become result folders and words of the jobs' shell lines: a label a shell would read
    (or that climbs out of the results tree) is refused before any job, naming the key."""
    config = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    for name, value in edit.items():   # one entry added, the rest of the default kept
        for sub, entry in value.items():
            config[name][sub] = {**config[name][sub], **entry} if isinstance(entry, dict) else entry
    with pytest.raises(LoopKVError) as raised:
        load_config(config, check_paths=False)
    assert re.search(rf"config key '{re.escape(key)}'[^\n]*(does not match|must match)", str(raised.value)), str(raised.value)


def test_a_recursive_yaml_alias_is_named_not_a_recursion_error(tmp_path):
    from loopkv.config import load_workflow_config

    path = tmp_path / "recursive.yaml"
    path.write_text("data: &a {corpus: {text_files: *a}}\n")
    with pytest.raises(LoopKVError, match="'data.corpus.text_files': holds itself"):
        load_workflow_config([path], check_paths=False)


# ---------------------------------------------------------------- the model family


HUGINN_FIXTURE = ROOT / "tests" / "fixtures" / "huginn-tiny-reference"
# the fixture's shape in loopkv's names (its config.json: n_embd 64, 4 heads, core 2 x 4 steps, 1 + 1)
HUGINN_MATCHING = {"model.family": "huginn", "model.source": "pretrained", "model.path": str(HUGINN_FIXTURE),
                   "model.arch.hidden_size": 64, "model.arch.num_attention_heads": 4, "model.arch.head_dim": 16,
                   "model.arch.num_hidden_layers": 2, "model.arch.total_ut_steps": 4,
                   "model.arch.intermediate_size": 128, "model.arch.rope_theta": 50000,
                   "model.arch.max_position_embeddings": 64, "model.huginn.prelude_layers": 1,
                   "model.huginn.coda_layers": 1, "model.huginn.backprop_steps": 2,
                   "data.tokenizer.vocab_size": 256, "methods.budgets": {}, "methods.table1": {}}


def _huginn_config(**edits) -> dict:
    cfg = copy.deepcopy(DEFAULT_VALUES)
    for dotted, value in {**HUGINN_MATCHING, **edits}.items():
        _set(cfg, dotted, value)
    return cfg


def _first_problem(cfg) -> str:
    """The first problem of a model key (the tiny fixture's 64 positions give others)."""
    with pytest.raises(LoopKVError) as info:
        load_config(cfg, check_paths=True)
    return next(line for line in str(info.value).splitlines() if line.startswith("config key 'model."))


def test_a_huginn_checkpoint_is_checked_under_its_own_field_names():
    """Huginn's config.json states loopkv's shape under its own names (n_embd, mean_recurrence, ...):
    each is compared, and a checkpoint of the other family is refused by its model_type."""
    try:
        load_config(_huginn_config(), check_paths=True)
    except LoopKVError as e:   # only problems of other keys may remain (the tiny fixture's 64 positions)
        assert not any(line.startswith("config key 'model.") for line in str(e).splitlines()), str(e)
    first = _first_problem(_huginn_config(**{"model.arch.total_ut_steps": 32}))
    assert first.startswith("config key 'model.arch.total_ut_steps': is 32 but the checkpoint's config.json")
    assert "has mean_recurrence = 4" in first
    first = _first_problem(_huginn_config(**{"model.huginn.coda_layers": 2}))
    assert first.startswith("config key 'model.huginn.coda_layers': is 2") and "n_layers_in_coda = 1" in first
    first = _first_problem(_huginn_config(**{"model.family": "ouro"}))
    assert first.startswith("config key 'model.family': is 'ouro' (model_type 'ouro') but the checkpoint's "
                            "config.json") and "has model_type 'huginn_raven'" in first


def test_a_huginn_architecture_must_split_its_width_into_heads():
    cfg = copy.deepcopy(DEFAULT_VALUES)
    _set(cfg, "model.family", "huginn")
    _set(cfg, "report.paper_model", "Huginn-3.5B")
    _set(cfg, "model.arch.head_dim", 16)   # 4 heads x 16 != 128
    with pytest.raises(LoopKVError, match=r"config key 'model\.arch\.hidden_size': family huginn: must equal "
                                          r"num_attention_heads x head_dim \(4 x 16\), got 128"):
        load_config(cfg, check_paths=False)
    _set(cfg, "model.family", "llama")
    with pytest.raises(LoopKVError, match=r"config key 'model\.family'"):
        load_config(cfg, check_paths=False)


def test_the_teacher_job_reads_the_family_only_where_it_changes_the_model():
    """An Ouro run's teacher slice is model.arch as it was before families existed (nothing reruns);
    a Huginn run's carries the family and model.huginn, not Ouro's own sublayer_norm_init."""
    from loopkv.jobs.declared import job_spec
    from loopkv.jobs.slices import job_slice

    spec = job_spec("teacher-pretrain")
    ouro = load_config(copy.deepcopy(DEFAULT_VALUES), check_paths=False)
    assert job_slice(spec, ouro)["model"] == {"arch": DEFAULT_VALUES["model"]["arch"],
                                              "dtype": DEFAULT_VALUES["model"]["dtype"]}
    cfg = copy.deepcopy(DEFAULT_VALUES)
    _set(cfg, "model.family", "huginn")
    _set(cfg, "report.paper_model", "Huginn-3.5B")
    arch = job_slice(spec, load_config(cfg, check_paths=False))["model"]["arch"]
    want = {k: v for k, v in DEFAULT_VALUES["model"]["arch"].items() if k != "sublayer_norm_init"}
    assert arch == {"family": "huginn", **want, **DEFAULT_VALUES["model"]["huginn"]}


def test_a_paper_model_is_of_the_runs_family():
    cfg = copy.deepcopy(DEFAULT_VALUES)
    _set(cfg, "model.family", "huginn")
    with pytest.raises(LoopKVError, match=r"config key 'report\.paper_model': 'Ouro-1\.4B' is a paper model of "
                                          r"another family than model\.family 'huginn'"):
        load_config(cfg, check_paths=False)
    _set(cfg, "model.family", "ouro")
    _set(cfg, "report.paper_model", "Huginn-3.5B")
    with pytest.raises(LoopKVError, match=r"config key 'report\.paper_model': 'Huginn-3\.5B'"):
        load_config(cfg, check_paths=False)
