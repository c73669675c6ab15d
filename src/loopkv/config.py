"""Load, complete and check a loopkv config.

The schema (workflow/schemas/config.schema.yaml) is the single source of defaults, types and ranges;
this module adds what a schema cannot say well: cross-key rules and the existence of paths. Every
error names the dotted key it is about, so a user can find the line to fix.
"""
from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import jsonschema
import yaml

from loopkv.errors import LoopKVError

_REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = _REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG_PATH = _REPO_ROOT / "config" / "config.yaml"

# 256 byte tokens + 3 specials: a byte-level BPE cannot be smaller than its base alphabet.
MIN_BPE_VOCAB = 259

# jsonschema counts 3.0 as an integer; a step count or size written as a float is a mistake here.
_TYPE_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, x: isinstance(x, int) and not isinstance(x, bool)
)
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, type_checker=_TYPE_CHECKER
)

Problem = tuple[str, str]  # (dotted key, message)


@functools.lru_cache(maxsize=1)
def load_schema() -> dict:
    """The config schema as a dict (cached: do not mutate)."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


# ---------------------------------------------------------------- loading and defaults


def load_config(path_or_dict: str | os.PathLike | dict, *, check_paths: bool = True,
                base_dir: str | os.PathLike | None = None) -> dict:
    """Read a YAML file (or copy a dict), fill schema defaults, validate, return the full config."""
    if isinstance(path_or_dict, (str, os.PathLike)):
        raw = _read_yaml(Path(path_or_dict))
    else:  # already parsed (e.g. Snakemake's `config`); a non-mapping is reported by validation
        raw = copy.deepcopy(path_or_dict)
    config = apply_defaults(raw)
    validate_config(config, check_paths=check_paths, base_dir=base_dir)
    return config


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise LoopKVError(f"config file does not exist: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise LoopKVError(f"config file {path}: not valid YAML: {e}") from e
    return {} if data is None else data  # an empty file means "all defaults"


def apply_defaults(config: Any, schema: dict | None = None) -> Any:
    """Return a copy of `config` with every missing key set to its schema default, recursively.

    A missing object takes its `default` (usually `{}`) and is then filled from its children's
    defaults; so is every object in a list. Values of the wrong type are left alone for validation to report.
    """
    schema = load_schema() if schema is None else schema
    if isinstance(config, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"]) for item in config]   # e.g. lm_eval.tasks entries
    if not isinstance(config, dict) or "properties" not in schema:
        return copy.deepcopy(config)
    out = copy.deepcopy(config)
    for key, sub in schema["properties"].items():
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = apply_defaults(out[key], sub)
    return out


# ---------------------------------------------------------------- validation


def validate_config(config: Any, check_paths: bool = True,
                    base_dir: str | os.PathLike | None = None) -> None:
    """Raise LoopKVError listing every problem (first line = first problem) if `config` is invalid.

    Schema errors are reported first; cross-key and path checks run only on a schema-valid config,
    so they can rely on types. Relative paths are resolved against `base_dir` (default: cwd).
    """
    problems = schema_problems(config)
    if not problems:
        problems = list(semantic_problems(config))
        if check_paths:
            problems += _path_problems(config, Path.cwd() if base_dir is None else Path(base_dir))
    if problems:
        raise LoopKVError("\n".join(_format(key, msg) for key, msg in problems))


def _format(key: str, msg: str) -> str:
    return f"config key '{key}': {msg}" if key else f"config: {msg}"


def schema_problems(config: Any) -> list[Problem]:
    """Schema violations as (dotted key, message), in schema order."""
    validator = _Validator(load_schema())
    problems: list[Problem] = []
    for error in validator.iter_errors(config):
        problems.extend(_translate(error))
    return problems


def dotted_key(path: Iterable[str | int]) -> str:
    """['data', 'corpus', 'text_files', 0] -> 'data.corpus.text_files[0]'."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string",
               "object": "a mapping", "array": "a list", "boolean": "true/false", "null": "null"}
# YAML 1.1 (PyYAML) reads 3e-3 as a string; only 3.0e-3 is a float.
_YAML_FLOAT_STRING = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _show(value: Any) -> str:
    """A value as a user would write it in YAML, with its type when that is the problem."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, dict):
        return f"mapping {value!r}"
    if isinstance(value, list):
        return f"list {value!r}"
    return repr(value)


def _translate(error: jsonschema.ValidationError) -> list[Problem]:
    """One jsonschema error -> problems keyed by the dotted path of the offending key."""
    path = list(error.absolute_path)
    key = dotted_key(path)
    kind, bound, value = error.validator, error.validator_value, error.instance
    if kind == "additionalProperties":
        # the error sits on the parent object; name each unknown key itself
        allowed = list(error.schema.get("properties", {}))
        problems = []
        for extra in (k for k in value if k not in allowed):
            close = difflib.get_close_matches(str(extra), allowed, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            problems.append((dotted_key(path + [extra]),
                             f"unknown key ({hint}allowed: {', '.join(allowed)})"))
        return problems
    if kind == "required":
        return [(dotted_key(path + [k]), "missing required key") for k in bound if k not in value]
    if kind == "type":
        wanted = " or ".join(_TYPE_NAMES.get(t, t) for t in ([bound] if isinstance(bound, str) else bound))
        msg = f"must be {wanted}, got {_show(value)}"
        if isinstance(value, str) and _YAML_FLOAT_STRING.match(value):
            msg += f" (YAML reads {value} as text: write it with a decimal point, e.g. 1.0e-3)"
        return [(key, msg)]
    messages: dict[str, Callable[[], str]] = {
        "minimum": lambda: f"must be >= {bound}, got {_show(value)}",
        "exclusiveMinimum": lambda: f"must be > {bound}, got {_show(value)}",
        "maximum": lambda: f"must be <= {bound}, got {_show(value)}",
        "exclusiveMaximum": lambda: f"must be < {bound}, got {_show(value)}",
        "multipleOf": lambda: f"must be a multiple of {bound}, got {_show(value)}",
        "enum": lambda: f"must be one of {', '.join(map(str, bound))}; got {_show(value)}",
        "minItems": lambda: f"must have at least {bound} item(s), got {_show(value)}",
        "uniqueItems": lambda: f"must not repeat items, got {_show(value)}",
        "minLength": lambda: f"must not be empty, got {_show(value)}",
    }
    return [(key, messages[kind]() if kind in messages else error.message)]


# ---------------------------------------------------------------- cross-key checks
# Each check takes a schema-valid, complete config and yields (dotted key, message). New sections
# add a function and list it in _SEMANTIC_CHECKS.


def _check_corpus(c: dict) -> Iterator[Problem]:
    corpus = c["data"]["corpus"]
    val, test = corpus["val_fraction"], corpus["test_fraction"]
    if val + test >= 1:
        yield ("data.corpus.val_fraction",
               f"val_fraction + test_fraction must be < 1 (leave a train split), got {val} + {test}")
    if not corpus["sources"] and not corpus["text_files"]:
        yield "data.corpus.sources", "no text: sources and text_files are both empty"


def _check_tokenizer(c: dict) -> Iterator[Problem]:
    tok, model = c["data"]["tokenizer"], c["model"]
    if tok["kind"] == "bpe" and tok["vocab_size"] < MIN_BPE_VOCAB:
        yield ("data.tokenizer.vocab_size",
               f"must be >= {MIN_BPE_VOCAB} for bpe (256 bytes + 3 specials), got {tok['vocab_size']}")
    if tok["kind"] == "pretrained" and tok["path"] is None:
        yield "data.tokenizer.path", "required when data.tokenizer.kind is 'pretrained'"
    if model["source"] == "pretrained" and tok["kind"] != "pretrained":
        # a checkpoint's embeddings only make sense with the tokenizer it was trained with
        yield ("data.tokenizer.kind",
               f"must be 'pretrained' when model.source is 'pretrained', got {tok['kind']!r}")


def _check_tasks(c: dict) -> Iterator[Problem]:
    arith = c["data"]["tasks"]["arithmetic"]
    if arith["min_steps"] > arith["max_steps"]:
        yield ("data.tasks.arithmetic.min_steps",
               f"must be <= max_steps ({arith['max_steps']}), got {arith['min_steps']}")
    if arith["max_operand"] > arith["max_value"]:
        yield ("data.tasks.arithmetic.max_operand",
               f"must be <= max_value ({arith['max_value']}), got {arith['max_operand']}")
    passkey = c["data"]["tasks"]["passkey"]
    seq_len = c["teacher"]["seq_len"]
    max_pos = c["model"]["arch"]["max_position_embeddings"]
    # a packed training example is <bos> + example + <eos>, in a row of seq_len + 1 tokens
    too_long = [n for n in passkey["train_lengths"] if n > seq_len - 1]
    if too_long:
        yield ("data.tasks.passkey.train_lengths",
               f"every length must be < teacher.seq_len ({seq_len}), got {too_long}")
    too_long = [n for n in passkey["eval_lengths"] if n > max_pos]
    if too_long:
        yield ("data.tasks.passkey.eval_lengths",
               f"every length must be <= model.arch.max_position_embeddings ({max_pos}), got {too_long}")


def _check_model(c: dict) -> Iterator[Problem]:
    model = c["model"]
    if model["source"] == "pretrained" and model["path"] is None:
        yield "model.path", "required when model.source is 'pretrained'"


def _check_windows(c: dict) -> Iterator[Problem]:
    """Every token window and every row mixture the stages use."""
    max_pos = c["model"]["arch"]["max_position_embeddings"]
    for section in ("teacher", "teacher_eval", "calibration", "distill", "method_eval", "melt"):
        length = c[section]["seq_len"]
        if length > max_pos:
            yield f"{section}.seq_len", f"must be <= model.arch.max_position_embeddings ({max_pos}), got {length}"
    for section in ("teacher", "calibration", "distill", "melt"):
        mixture = c[section]["mixture"]
        if sum(mixture.values()) <= 0:
            yield f"{section}.mixture", f"weights must have a positive sum, got {mixture}"


def _check_schedules(c: dict) -> Iterator[Problem]:
    for section in ("teacher", "distill"):
        if c[section]["warmup_steps"] > c[section]["steps"]:
            yield (f"{section}.warmup_steps",
                   f"must be <= {section}.steps ({c[section]['steps']}), got {c[section]['warmup_steps']}")


def _check_serve(c: dict) -> Iterator[Problem]:
    """Served budgets are labels of methods.budgets; RoPE needs an even head width."""
    labels = c["methods"]["budgets"]
    for i, label in enumerate(c["serve"]["budgets"]):
        if label not in labels:
            yield f"serve.budgets[{i}]", f"must be a label of methods.budgets ({', '.join(labels)}), got {label!r}"
    if c["serve"]["latency_budget"] not in labels:
        yield ("serve.latency_budget",
               f"must be a label of methods.budgets ({', '.join(labels)}), got {c['serve']['latency_budget']!r}")
    if c["serve"]["kernel"]["head_dim"] % 2:
        yield "serve.kernel.head_dim", f"must be even (RoPE rotates pairs), got {c['serve']['kernel']['head_dim']}"


def _check_launch(c: dict) -> Iterator[Problem]:
    """Each DeepSpeed rank takes an equal share of every training batch."""
    ranks = c["launch"]["ranks"]
    for section in ("distill", "melt", "on_policy"):
        if c[section]["batch_size"] % ranks:
            yield (f"{section}.batch_size",
                   f"must divide by launch.ranks ({ranks}): each rank takes an equal share, got {c[section]['batch_size']}")


def _check_packed_rows(c: dict) -> Iterator[Problem]:
    """Stages that pack whole passkey examples (<bos> + example + <eos>) into rows, like training."""
    for section in ("calibration", "distill", "melt"):
        length = c[section]["seq_len"]
        too_long = [n for n in c["data"]["tasks"]["passkey"]["train_lengths"] if n > length - 1]
        if c[section]["mixture"].get("passkey", 0) > 0 and too_long:
            yield (f"{section}.seq_len",
                   f"must exceed every data.tasks.passkey.train_lengths when the mixture draws passkey rows, "
                   f"got {length} for lengths {too_long}")


def _check_methods(c: dict) -> Iterator[Problem]:
    """Every table cell must be a budget its method reaches exactly on this architecture."""
    from loopkv.cache.budget import CacheShape, setting_at_ratio
    from loopkv.cache.settings import CACHE_BITS, LAYOUT_OF_CODEC

    methods, arch = c["methods"], c["model"]["arch"]
    shape = CacheShape(arch["num_hidden_layers"], arch["num_attention_heads"], arch["total_ut_steps"],
                       arch["head_dim"])
    for budget, names in methods["table1"].items():
        if budget not in methods["budgets"]:
            yield (f"methods.table1.{budget}",
                   f"unknown budget label (methods.budgets has {', '.join(methods['budgets'])})")
            continue
        ratio = methods["budgets"][budget]
        for name in names:
            layout = LAYOUT_OF_CODEC.get(name)
            if layout is not None and layout not in c["calibration"]["layouts"]:
                yield (f"methods.table1.{budget}",
                       f"{name} is SVD-initialised from {layout!r} moments: add it to calibration.layouts")
                continue
            if setting_at_ratio(name, shape, ratio, CACHE_BITS[methods["cache_dtype"]], methods["k_share"]) is None:
                yield (f"methods.table1.{budget}",
                       f"{name} cannot reach {ratio:g}x with T={shape.loops}, D={shape.layers}, "
                       f"H={shape.heads}, d_head={shape.head_dim} and a {methods['cache_dtype']} cache")


def melt_budget_label(c: dict) -> str | None:
    """The label in methods.budgets whose ratio is T: MELT's fixed budget (one row per layer)."""
    loops = c["model"]["arch"]["total_ut_steps"]
    return next((label for label, ratio in c["methods"]["budgets"].items() if abs(ratio - loops) < 1e-6), None)


def _check_melt(c: dict) -> Iterator[Problem]:
    from loopkv.cache.registry import METHODS
    from loopkv.train.melt_recipes import RECIPE_KEYS

    melt = c["melt"]
    for stage in ("stage1", "stage2"):
        if melt[stage]["warmup_steps"] > melt[stage]["steps"]:
            yield (f"melt.{stage}.warmup_steps",
                   f"must be <= melt.{stage}.steps ({melt[stage]['steps']}), got {melt[stage]['warmup_steps']}")
    if melt["stage1"]["alpha_ramp_steps"] > melt["stage1"]["steps"]:
        yield ("melt.stage1.alpha_ramp_steps",
               f"must be <= melt.stage1.steps ({melt['stage1']['steps']}), got {melt['stage1']['alpha_ramp_steps']}")
    gates = ("full", "single", "mean", "ema", "last")
    for name, overrides in melt["ablations"].items():
        if name == "full":
            yield "melt.ablations.full", "'full' is the recipe itself, not an ablation"
        for key, value in overrides.items():
            if key not in RECIPE_KEYS:
                yield f"melt.ablations.{name}.{key}", f"unknown recipe key (recipe keys: {', '.join(RECIPE_KEYS)})"
            elif key == "gate" and value not in gates:
                yield f"melt.ablations.{name}.gate", f"must be one of {gates}, got {value!r}"
            elif key in ("interpolation", "align_stage") and not isinstance(value, bool):
                yield f"melt.ablations.{name}.{key}", f"must be true or false, got {value!r}"
            elif key == "chunk_size" and value is not None and (not isinstance(value, int) or value < 1):
                yield f"melt.ablations.{name}.chunk_size", f"must be a positive integer or null, got {value!r}"
            elif key == "ema_decay" and not (isinstance(value, (int, float)) and 0 <= value < 1):
                yield f"melt.ablations.{name}.ema_decay", f"must be in [0, 1), got {value!r}"
    label = melt_budget_label(c)
    if label is None:
        yield ("methods.budgets", f"needs a budget of {c['model']['arch']['total_ut_steps']}x (= T, MELT's fixed "
               f"budget): MELT and the methods compared with it are evaluated there")
    unknown = [m for m in melt["compare_methods"] if m not in METHODS or m == "melt"]
    if unknown:
        yield "melt.compare_methods", f"unknown KV methods {unknown} (known: {', '.join(sorted(set(METHODS) - {'melt'}))})"
    elif melt["compare_methods"] and label is not None:
        probe = {**c, "methods": {**c["methods"], "table1": {label: melt["compare_methods"]}}}
        for _, message in _check_methods(probe):
            yield "melt.compare_methods", message


def _check_lm_eval(c: dict) -> Iterator[Problem]:
    """Known task data and (method, budget) pairs that the rest of the config can build."""
    from loopkv.eval.lm_tasks import LM_TASKS

    known, seen = {t.data for t in LM_TASKS.values()}, set()
    for i, task in enumerate(c["lm_eval"]["tasks"]):
        if task["name"] not in known:
            yield f"lm_eval.tasks[{i}].name", f"unknown task {task['name']!r} (known: {', '.join(sorted(known))})"
        elif task["name"] in seen:
            yield f"lm_eval.tasks[{i}].name", f"task {task['name']!r} is listed twice"
        seen.add(task["name"])
    yield from _check_served(c, "lm_eval.models")


def _check_on_policy(c: dict) -> Iterator[Problem]:
    from loopkv.cache.settings import CODEC_METHODS

    cfg = c["on_policy"]
    if cfg["method"] not in CODEC_METHODS:
        yield "on_policy.method", f"must be a codec method ({', '.join(CODEC_METHODS)}), got {cfg['method']!r}"
        return
    for i, budget in enumerate(cfg["budgets"]):
        if budget not in c["methods"]["budgets"]:
            yield f"on_policy.budgets[{i}]", f"unknown budget label {budget!r} (methods.budgets has {', '.join(c['methods']['budgets'])})"
        else:
            probe = {**c, "methods": {**c["methods"], "table1": {budget: [cfg["method"]]}}}
            for _, message in _check_methods(probe):
                yield f"on_policy.budgets[{i}]", message


def _check_passkey_grid(c: dict) -> Iterator[Problem]:
    grid = c["passkey_grid"]
    max_pos = c["model"]["arch"]["max_position_embeddings"]
    too_long = [n for n in grid["lengths"] if n > max_pos]
    if too_long and c["model"]["source"] == "scratch":
        yield ("passkey_grid.lengths",
               f"every length must be <= model.arch.max_position_embeddings ({max_pos}), got {too_long}")
    yield from _check_served(c, "passkey_grid.models")


def _check_served(c: dict, section_key: str) -> Iterator[Problem]:
    """METHOD/BUDGET pairs that the rest of the config can build and serve."""
    from loopkv.cache.registry import METHODS

    section, key_name = section_key.split(".")
    melt_label = melt_budget_label(c)
    for i, pair in enumerate(c[section][key_name]):
        key = f"{section_key}[{i}]"
        method, budget = pair.split("/")
        if method not in METHODS:
            yield key, f"unknown KV method {method!r} (known: {', '.join(sorted(METHODS))})"
        elif (method == "full") != (budget == "1x"):
            yield key, "the teacher's own cache is full/1x, and only full runs at 1x"
        elif budget != "1x" and budget not in c["methods"]["budgets"]:
            yield key, f"unknown budget label {budget!r} (methods.budgets has {', '.join(c['methods']['budgets'])})"
        elif method == "melt" and budget != melt_label:
            yield key, f"MELT runs only at its own budget (ratio T), {melt_label!r} here"
        elif method not in ("full", "melt"):
            probe = {**c, "methods": {**c["methods"], "table1": {budget: [method]}}}
            for _, message in _check_methods(probe):
                yield key, message


_SEMANTIC_CHECKS: list[Callable[[dict], Iterator[Problem]]] = [
    _check_corpus, _check_tokenizer, _check_tasks, _check_model, _check_windows, _check_schedules,
    _check_packed_rows, _check_launch, _check_methods, _check_melt, _check_lm_eval, _check_passkey_grid,
    _check_on_policy, _check_serve,
]


def semantic_problems(config: dict) -> Iterator[Problem]:
    """Cross-key problems of a schema-valid, complete config."""
    for check in _SEMANTIC_CHECKS:
        yield from check(config)


def _path_problems(c: dict, base: Path) -> list[Problem]:
    problems: list[Problem] = []
    model_path = c["model"]["path"]
    if model_path is not None:
        p = base / model_path
        if not p.is_dir():
            problems.append(("model.path", f"checkpoint directory does not exist: {p}"))
        elif not (p / "config.json").is_file():
            problems.append(("model.path", f"checkpoint directory has no config.json: {p}"))
        elif c["model"]["source"] == "pretrained":
            problems += _checkpoint_problems(c, p / "config.json")
    tok_path = c["data"]["tokenizer"]["path"]
    if tok_path is not None and not (base / tok_path).exists():
        problems.append(("data.tokenizer.path", f"tokenizer path does not exist: {base / tok_path}"))
    for i, name in enumerate(c["data"]["corpus"]["text_files"]):
        if not (base / name).is_file():
            problems.append((f"data.corpus.text_files[{i}]", f"text file does not exist: {base / name}"))
    for i, name in enumerate(c["serve"]["kernel"]["measured"]):
        if not (base / name).is_file():
            problems.append((f"serve.kernel.measured[{i}]", f"kernel result does not exist: {base / name}"))
    return problems


def _checkpoint_problems(c: dict, config_json: Path) -> list[Problem]:
    """A pretrained checkpoint decides its architecture: every model.arch key its config.json states
    must equal it (budgets, MELT's label and the serving models read model.arch), and so must the
    vocabulary data.tokenizer.vocab_size names."""
    try:
        shipped = json.loads(config_json.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [("model.path", f"{config_json} is not readable JSON ({type(e).__name__}: {e})")]
    if not isinstance(shipped, dict):
        return [("model.path", f"{config_json} is not a JSON object")]
    problems: list[Problem] = []
    for key, value in c["model"]["arch"].items():
        if key in shipped and shipped[key] != value:
            problems.append((f"model.arch.{key}", f"is {_show(value)} but the checkpoint's config.json "
                                                  f"({config_json}) has {_show(shipped[key])}"))
    vocab = c["data"]["tokenizer"]["vocab_size"]
    if "vocab_size" in shipped and shipped["vocab_size"] != vocab:
        problems.append(("data.tokenizer.vocab_size", f"is {vocab} but the checkpoint's config.json "
                                                      f"({config_json}) has {_show(shipped['vocab_size'])}"))
    return problems


# ---------------------------------------------------------------- slices for jobs


def config_slice(config: dict, *dotted_keys: str) -> dict:
    """{dotted key: copy of its value} for the keys a rule uses (passed to its job as JSON)."""
    out = {}
    for key in dotted_keys:
        node: Any = config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise LoopKVError(f"config key '{key}': not in the config")
            node = node[part]
        out[key] = copy.deepcopy(node)
    return out
