"""Load, complete and check a loopkv config.

config/config.yaml is the single source of defaults: every config is it with the given files merged
over it key by key, exactly as Snakemake merges `--configfile` files over the Snakefile's
`configfile:`, so a partial config means the same here as in a run. The schema
(workflow/schemas/config.schema.yaml) holds types and ranges (every size that drives memory or time
has an upper bound there) and no defaults; this module adds what a schema cannot say well: names the
registries define, cross-key rules, the kinds and existence of paths, and reading and merging config
files as Snakemake does, so that `loopkv config-check` validates the config Snakemake will run. Every
error names the dotted key it is about, so a user can find the line to fix.
"""
from __future__ import annotations

import collections.abc
import copy
import datetime
import difflib
import functools
import json
import math
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

# The Snakefile's own config file (its `configfile:`), relative to the working directory.
WORKFLOW_CONFIGFILE = "config/config.yaml"

# lm_eval.tasks is a list, which a config file replaces whole: an entry's left-out keys have no
# config/config.yaml value to merge with, so they are stated here, once (the whole set, one shard,
# the task's own generation budget, zero-shot, the benchmark's one unlabelled way of running, greedy).
LM_EVAL_TASK_DEFAULTS = {"max_docs": None, "max_docs_per_group": None, "shards": 1, "max_gen_toks": None, "shots": None,
                         "variant": None, "sampling": None}

# The most lm-eval shard jobs (served models x shards of every task, plus the passkey grid's) one
# config may plan: Snakemake holds every job of the DAG in memory while it builds it, and a huge
# shard count exhausted that memory before any job ran. The paper config plans 188, the default 48.
MAX_LM_EVAL_JOBS = 10_000


def _is_integer(_checker, x) -> bool:
    # jsonschema counts 3.0 (and True) as an integer; a step count written as a float is a mistake here
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(_checker, x) -> bool:
    # finite numbers only: YAML's .nan / .inf (and JSON's NaN / Infinity) are never a valid setting,
    # and neither is true/false or a complex number (YAML !!python/complex)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return isinstance(x, int) or math.isfinite(x)


_TYPE_CHECKER = (jsonschema.Draft202012Validator.TYPE_CHECKER
                 .redefine("integer", _is_integer).redefine("number", _is_number))
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, type_checker=_TYPE_CHECKER
)

Problem = tuple[str, str]  # (dotted key, message)


@functools.lru_cache(maxsize=1)
def load_schema() -> dict:
    """The config schema as a dict (cached: do not mutate)."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


# ---------------------------------------------------------------- reading and merging, as Snakemake does


def load_config(path_or_dict: str | os.PathLike | dict, *, check_paths: bool = True,
                base_dir: str | os.PathLike | None = None) -> dict:
    """Read one config file (parsed as Snakemake parses it) or copy a dict, merge it over
    config/config.yaml (`complete_config`), validate, return the full config. A config that is
    already complete (the Snakefile's merged `config`) comes back unchanged, its key order kept."""
    if isinstance(path_or_dict, (str, os.PathLike)):
        raw = read_config_file(Path(path_or_dict))
        raw = {} if raw is None else raw   # an empty file means "all defaults"
    else:  # already parsed (e.g. Snakemake's `config`); a non-mapping is reported by validation
        raw = copy.deepcopy(path_or_dict)
    config = complete_config(raw)
    validate_config(config, check_paths=check_paths, base_dir=base_dir)
    return config


def load_workflow_config(configfiles: Iterable[str | os.PathLike] = (), config_args: Iterable[str] = (), *,
                         workflow_configfile: str | os.PathLike = WORKFLOW_CONFIGFILE,
                         replace_workflow_config: bool = False, check_paths: bool = True,
                         base_dir: str | os.PathLike | None = None) -> dict:
    """The config `snakemake --configfile FILES --config ARGS` runs in `base_dir` (default: cwd),
    filled and validated as the Snakefile does (workflow/rules/common.smk)."""
    raw = workflow_config(configfiles, config_args, workflow_configfile=workflow_configfile,
                          replace_workflow_config=replace_workflow_config, base_dir=base_dir)
    config = complete_config(raw)
    validate_config(config, check_paths=check_paths, base_dir=base_dir, check_dirs=True)
    return config


def workflow_config(configfiles: Iterable[str | os.PathLike] = (), config_args: Iterable[str] = (), *,
                    workflow_configfile: str | os.PathLike = WORKFLOW_CONFIGFILE,
                    replace_workflow_config: bool = False, base_dir: str | os.PathLike | None = None) -> dict:
    """Snakemake 9's `config` before the Snakefile's validation, merged as it merges (settings.types.
    ConfigSettings and Workflow.configfile): the command line's files in order, then --config KEY=VALUE
    on top, together the "overwrite config"; the Snakefile's own config file (workflow_configfile,
    relative to the working directory) is merged over a copy of it and the overwrite config over that
    again. So a mapping in a file is merged key by key into the default's (a key cannot be removed,
    a mixture written in part keeps the default's other weights) and any other value (a list)
    replaces the default's whole."""
    base_dir = Path.cwd() if base_dir is None else Path(base_dir)
    configfiles = [Path(f) for f in configfiles]
    overwrite: dict = {}
    for path in configfiles:
        update_config(overwrite, _read_mapping(path if path.is_absolute() else base_dir / path))
    update_config(overwrite, parse_config_args(config_args))
    own = Path(workflow_configfile)
    own = own if own.is_absolute() else base_dir / own
    if own.exists():
        replaced = replace_workflow_config and overwrite   # Snakemake drops its own file only for others
        return merge_over({} if replaced else _read_mapping(own), overwrite)
    if not configfiles:
        raise LoopKVError(f"the workflow's config file {own} does not exist (Snakemake stops there too; "
                          f"run from the workflow's directory or name config files)")
    return merge_over({}, overwrite)   # Snakemake: no workflow config file, the command line's files alone


def merge_over(base: dict, overwrite: dict) -> dict:
    """`overwrite` merged over `base` as Snakemake 9 merges the command line's config over the
    Snakefile's `configfile:` (Workflow.configfile): a copy of `overwrite`, `base` merged into it,
    `overwrite` merged on top again. So keys come in overwrite's order, then base's others; merging a
    result over `base` again changes nothing (the Snakefile's merged config stays as it is)."""
    config = copy.deepcopy(overwrite)
    update_config(config, copy.deepcopy(base))
    update_config(config, copy.deepcopy(overwrite))
    return config


@functools.lru_cache(maxsize=1)
def _default_config() -> dict:
    """config/config.yaml, read as Snakemake reads it: the one source of defaults (cached: do not mutate)."""
    return _read_mapping(DEFAULT_CONFIG_PATH)


def complete_config(raw: Any) -> Any:
    """`raw` merged over config/config.yaml (`merge_over`), each lm_eval.tasks entry's left-out keys
    from LM_EVAL_TASK_DEFAULTS. A non-mapping comes back as it is, for validation to report; so does a
    value of the wrong type (the merge replaces a default by it)."""
    if not isinstance(raw, dict):
        return copy.deepcopy(raw)
    config = merge_over(_default_config(), raw)
    lm_eval = config.get("lm_eval")
    tasks = lm_eval.get("tasks") if isinstance(lm_eval, dict) else None
    if isinstance(tasks, list):   # the entry's own keys first, as written
        lm_eval["tasks"] = [{**task, **{k: v for k, v in LM_EVAL_TASK_DEFAULTS.items() if k not in task}}
                            if isinstance(task, dict) else task for task in tasks]
    return config


def update_config(config: dict, overwrite: dict) -> None:
    """snakemake.utils.update_config, the same semantics: `overwrite` merged into `config` in place,
    nested mappings key by key, any other value replacing the old one."""

    def merge(config, overwrite):
        for key, value in overwrite.items():
            if not isinstance(config, collections.abc.Mapping):
                config = {}
            if isinstance(value, collections.abc.Mapping):
                config[key] = merge(config.get(key, {}), value)
            else:
                config[key] = value
        return config

    merge(config, overwrite)


_CONFIG_ARG_KEY = re.compile(r"[a-zA-Z_][\w-]*\w$")


def parse_config_args(entries: Iterable[str]) -> dict:
    """snakemake.cli.parse_config: `--config KEY=VALUE ...` as Snakemake reads them. Only top-level
    keys; each value is tried as an int, a float (so "nan" and "inf" are floats), True/False, YAML
    read with the BaseLoader (a nested mapping's values stay text), then text."""
    config: dict = {}

    def as_bool(value: str) -> bool:
        if value in ("True", "False"):
            return value == "True"
        raise ValueError(value)

    def as_yaml(value: str):
        return yaml.load(value, Loader=yaml.loader.BaseLoader)

    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep:
            raise LoopKVError(f"--config {entry!r}: must be KEY=VALUE (Snakemake refuses it too)")
        value = value.strip("'\"")
        if not _CONFIG_ARG_KEY.match(key):
            raise LoopKVError(f"--config {entry!r}: the key must be a top-level name (Snakemake refuses it too)")
        if value == "":
            update_config(config, {key: None})
            continue
        parsed = None
        for parser in (int, float, as_bool, as_yaml, str):
            try:
                parsed = parser(value)
                if not callable(parsed):
                    break
            except Exception:   # noqa: BLE001 - Snakemake tries the next reading on any failure
                pass
        update_config(config, {key: parsed})
    return config


def read_config_file(path: str | os.PathLike) -> Any:
    """A config file parsed as Snakemake parses one (snakemake.common.configfile): as JSON when it is
    JSON (NaN and Infinity included), else as YAML through YTE with PyYAML's FullLoader (templated
    only when the file sets `__use_yte__: true`). Unlike Snakemake it refuses a key given twice in
    one mapping (both parsers keep the last one silently), naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoopKVError(f"config file does not exist: {path}") from None
    except IsADirectoryError:
        raise LoopKVError(f"config file {path}: is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LoopKVError(f"config file {path}: cannot be read ({type(e).__name__}: {e})") from None
    try:
        data = json.loads(text, object_pairs_hook=_JSONObject)
    except ValueError:   # not JSON: YAML, as Snakemake tries next
        pass
    else:
        _refuse_duplicates(path, list(_json_duplicates(data, [])))
        return _plain(data)
    _refuse_duplicates(path, _yaml_duplicates(path, text))
    import yte   # Snakemake's YAML reader (a Snakemake dependency)

    try:
        return yte.process_yaml(text, require_use_yte=True)
    except yaml.YAMLError as e:
        raise LoopKVError(f"config file {path}: not valid YAML: {e}") from None
    except Exception as e:   # noqa: BLE001 - a YTE template's own code failed
        raise LoopKVError(f"config file {path}: its YTE template failed ({type(e).__name__}: {e})") from None


def _read_mapping(path: Path) -> dict:
    """A config file Snakemake accepts: a mapping at the top level."""
    data = read_config_file(path)
    for key, msg in _data_problems(data, []):   # before any merge: a self-holding mapping never ends
        if msg.startswith("holds itself"):
            raise LoopKVError(f"config file {path}: {_format(key, msg)}")
    if not isinstance(data, dict):
        got = "nothing (an empty file)" if data is None else _show(data)
        raise LoopKVError(f"config file {path}: must hold a mapping of config keys at the top level, got {got} "
                          f"(Snakemake refuses it too)")
    return data


def workflow_file_problems(paths: Iterable[str | os.PathLike]) -> list[str]:
    """What Snakemake's own parse of the config files it read lets pass and loopkv refuses (a key
    given twice), one message per file; for the Snakefile, which sees only the merged result. YTE
    templates are not rendered again (their keys are checked as written)."""
    problems = []
    for path in dict.fromkeys(str(p) for p in paths):
        try:
            text = Path(path).read_text(encoding="utf-8")
            try:
                data = json.loads(text, object_pairs_hook=_JSONObject)
            except ValueError:
                _refuse_duplicates(path, _yaml_duplicates(path, text))
            else:
                _refuse_duplicates(path, list(_json_duplicates(data, [])))
        except (OSError, UnicodeDecodeError):   # Snakemake read it: gone since, or not ours to judge
            continue
        except LoopKVError as e:
            problems.append(str(e))
    return problems


class _JSONObject(dict):
    """A JSON object that remembers the keys it was given more than once."""

    def __init__(self, pairs):
        super().__init__(pairs)
        keys = [k for k, _ in pairs]
        self.duplicates = [k for i, k in enumerate(keys) if k in keys[:i]]


def _json_duplicates(node: Any, path: list) -> Iterator[tuple[str, str]]:
    if isinstance(node, _JSONObject):
        for key in dict.fromkeys(node.duplicates):
            yield dotted_key(path + [str(key)]), "is given twice (JSON keeps the last one silently)"
        for key, value in node.items():
            yield from _json_duplicates(value, path + [str(key)])
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _json_duplicates(item, path + [i])


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _yaml_duplicates(path: str | Path, text: str | None) -> list[tuple[str, str]]:
    """(dotted key, message) of every key given twice in one YAML mapping (YAML merge keys `<<`
    excepted: overriding what they bring in is their purpose; so are YTE's `?` template keys)."""
    if text is None:
        text = Path(path).read_text(encoding="utf-8")
    loader = yaml.FullLoader(text)   # Snakemake's (YTE's) loader: the same nodes and keys
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as e:
        loader.dispose()
        raise LoopKVError(f"config file {path}: not valid YAML: {e}") from None
    found: list[tuple[str, str]] = []
    visited: set[int] = set()

    def key_of(node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return None
        try:
            key = loader.construct_object(node, deep=True)
            hash(key)
        except Exception:   # noqa: BLE001 - the real parse reports an unreadable key
            return None
        return key

    def walk(node, where: list) -> None:
        if node is None or id(node) in visited:   # an alias: its anchor was walked
            return
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = key_of(key_node)
                if isinstance(key, str) and key.startswith("?"):
                    continue
                line = key_node.start_mark.line + 1
                if key is not None and key in lines:
                    found.append((dotted_key(where + [str(key)]),
                                  f"is given twice (lines {lines[key]} and {line}; YAML keeps the last one silently)"))
                elif key is not None:
                    lines[key] = line
                walk(value_node, where + [str(key)])
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, where + [i])

    try:
        walk(root, [])
    finally:
        loader.dispose()
    return found


def _refuse_duplicates(path: str | Path, duplicates: list[tuple[str, str]]) -> None:
    if duplicates:
        raise LoopKVError("\n".join(f"config key '{key}': {msg} in {path}" for key, msg in duplicates))


# ---------------------------------------------------------------- validation


def validate_config(config: Any, check_paths: bool = True,
                    base_dir: str | os.PathLike | None = None, check_dirs: bool | None = None) -> None:
    """Raise LoopKVError listing every problem (first line = first problem) if `config` is invalid.

    Values that are not plain data (a non-text key, a date) are reported first, then schema errors;
    cross-key and path checks run only on a schema-valid config, so they can rely on types and
    bounds. Relative paths are resolved against `base_dir` (default: cwd). check_paths: the files
    and directories the config names must exist and be of their kind; check_dirs (default:
    check_paths): results_dir, reports_dir and logs_dir must be directories or creatable as such.
    """
    base = Path.cwd() if base_dir is None else Path(base_dir)
    problems = list(_data_problems(config, []))
    if not problems:
        problems = schema_problems(config)
    if not problems:
        problems = list(semantic_problems(config))
        if check_paths:
            problems += _path_problems(config, base)
        if check_paths if check_dirs is None else check_dirs:
            problems += _dir_problems(config, base)
    if problems:
        raise LoopKVError("\n".join(_format(key, msg) for key, msg in problems))


_PLAIN_SCALARS = (str, int, float, bool, type(None))


def _data_problems(node: Any, path: list, within: frozenset = frozenset()) -> Iterator[Problem]:
    """Keys that are not text and values YAML or JSON data cannot be (dates, tuples, sets, bytes...):
    PyYAML reads `4: x` as a number key and `2024-01-01` as a date; the schema cannot name them well.
    A mapping or list that holds itself (a recursive YAML alias) is named, not recursed into."""
    if isinstance(node, (dict, list)):
        if id(node) in within:
            yield (dotted_key(path), "holds itself (a recursive YAML alias): a config must be a tree")
            return
        within = within | {id(node)}
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                yield (dotted_key(path + [str(key)]),
                       f"keys must be text, got {_show(key)} (quote it in YAML: '{key}':)")
            else:
                yield from _data_problems(value, path + [key], within)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _data_problems(item, path + [i], within)
    elif not isinstance(node, _PLAIN_SCALARS):
        hint = " (quote it to make it text)" if isinstance(node, (datetime.date, datetime.datetime)) else ""
        yield (dotted_key(path), f"must be plain data (a mapping, list, text, number, true/false or null), "
                                 f"got {type(node).__name__} {node!r}{hint}")


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
    """A value as a user would write it in YAML, with its type when that is the problem (long
    values cut: a million-item list is named, not printed)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return {True: ".inf", False: "-.inf"}[value > 0] if math.isinf(value) else ".nan"
    if isinstance(value, str):
        text = f"string {value!r}"
    elif isinstance(value, dict):
        text = f"mapping {value!r}"
    elif isinstance(value, list):
        text = f"list {value!r}"
    else:
        text = repr(value)
    return text if len(text) <= 200 else f"{text[:160]}... ({len(value) if hasattr(value, '__len__') else len(text)} long)"


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
        if isinstance(value, float) and not math.isfinite(value) and "number" in str(bound):
            msg = f"must be a finite number, got {_show(value)}"
        elif isinstance(value, bool) and any(t in ("integer", "number") for t in ([bound] if isinstance(bound, str) else bound)):
            msg += " (true/false is not a number here)"
        if isinstance(value, str) and _YAML_FLOAT_STRING.match(value):
            msg += f" (YAML reads {value} as text: write it with a decimal point, e.g. 1.0e-3)"
        return [(key, msg)]
    messages: dict[str, Callable[[], str]] = {
        "minimum": lambda: f"must be >= {bound}, got {_show(value)}",
        "exclusiveMinimum": lambda: f"must be > {bound}, got {_show(value)}",
        "maximum": lambda: (f"must be <= {bound}, got {_show(value)} (the upper bound of a size that drives "
                            f"memory or time: see the key's description in the schema)"),
        "exclusiveMaximum": lambda: f"must be < {bound}, got {_show(value)}",
        "multipleOf": lambda: f"must be a multiple of {bound}, got {_show(value)}",
        "enum": lambda: _not_one_of(bound, value),
        "minItems": lambda: f"must have at least {bound} item(s), got {_show(value)}",
        "uniqueItems": lambda: f"must not repeat items, got {_show(value)}{_repeated(value)}",
        "maxItems": lambda: f"must have at most {bound} items, got {len(value)}",
        "maxProperties": lambda: f"must have at most {bound} entries, got {len(value)}",
        "minProperties": lambda: f"must have at least {bound} entr{'y' if bound == 1 else 'ies'}, got {_show(value)}",
        "minLength": lambda: f"must not be empty, got {_show(value)}",
    }
    return [(key, messages[kind]() if kind in messages else error.message)]


def _not_one_of(allowed: Iterable, value: Any) -> str:
    return f"must be one of {', '.join(map(str, allowed))}; got {_show(value)}"


def _repeated(items: list) -> str:
    seen, twice = [], []
    for item in items:
        (twice if item in seen and item not in twice else seen).append(item)
    return f" ({', '.join(map(str, twice))} more than once)" if twice else ""


# ---------------------------------------------------------------- names the registries define


def _check_names(c: dict) -> Iterator[Problem]:
    """KV method and MELT gate names, checked against their registries rather than enumerated in the
    schema, so a new method or gate is added in one place (imported here: the Snakefile imports this
    module, and the registries import torch)."""
    from loopkv.cache.registry import budgeted_methods
    from loopkv.models.melt_gate import VARIANTS

    budgeted = budgeted_methods()
    for label, names in c["methods"]["table1"].items():
        for i, name in enumerate(names):
            if name not in budgeted:
                yield f"methods.table1.{label}[{i}]", _not_one_of(budgeted, name)
    melt = c["melt"]
    if melt["gate"] not in VARIANTS:
        yield "melt.gate", _not_one_of(VARIANTS, melt["gate"])
    for name, overrides in melt["ablations"].items():
        if "gate" in overrides and overrides["gate"] not in VARIANTS:
            yield f"melt.ablations.{name}.gate", _not_one_of(VARIANTS, overrides["gate"])
    from loopkv.data.local_benchmarks import LOCAL_BENCHMARKS

    for name in c["data"]["local_benchmarks"]:
        if name not in LOCAL_BENCHMARKS:
            close = difflib.get_close_matches(name, LOCAL_BENCHMARKS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            yield (f"data.local_benchmarks.{name}",
                   f"unknown benchmark ({hint}those read from your files: {', '.join(LOCAL_BENCHMARKS)})")


# ---------------------------------------------------------------- cross-key checks
# Each check takes a schema-valid, complete config whose names are known (_check_names) and yields
# (dotted key, message). New sections add a function and list it in _SEMANTIC_CHECKS.


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
    huginn_paper = c["report"]["paper_model"].startswith("Huginn")
    if huginn_paper != (model["family"] == "huginn"):
        yield ("report.paper_model", f"{c['report']['paper_model']!r} is a paper model of another family than "
                                     f"model.family {model['family']!r}: its numbers are not this run's to stand beside")
    arch = model["arch"]
    if model["family"] == "huginn" and arch["hidden_size"] != arch["num_attention_heads"] * arch["head_dim"]:
        yield ("model.arch.hidden_size", f"family huginn: must equal num_attention_heads x head_dim "
                                         f"({arch['num_attention_heads']} x {arch['head_dim']}), got {arch['hidden_size']}")


def _used(c: dict, sections: tuple[str, ...]) -> tuple[str, ...]:
    """The stages of `sections` this config runs: a Huginn run has no MELT job (its gate serves looped
    layers only), so MELT's settings are not checked against it."""
    return tuple(s for s in sections if s != "melt" or c["model"]["family"] == "ouro")


def _check_windows(c: dict) -> Iterator[Problem]:
    """Every token window and every row mixture the stages use."""
    max_pos = c["model"]["arch"]["max_position_embeddings"]
    for section in _used(c, ("teacher", "teacher_eval", "calibration", "distill", "method_eval", "melt", "on_policy")):
        length = c[section]["seq_len"]
        if length > max_pos:
            yield f"{section}.seq_len", f"must be <= model.arch.max_position_embeddings ({max_pos}), got {length}"
    for section in _used(c, ("teacher", "calibration", "distill", "melt")):
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
    for section in _used(c, ("distill", "melt", "on_policy")):
        if c[section]["batch_size"] % ranks:
            yield (f"{section}.batch_size",
                   f"must divide by launch.ranks ({ranks}): each rank takes an equal share, got {c[section]['batch_size']}")


def _check_packed_rows(c: dict) -> Iterator[Problem]:
    """Stages that pack whole passkey examples (<bos> + example + <eos>) into rows, like training."""
    for section in _used(c, ("calibration", "distill", "melt")):
        length = c[section]["seq_len"]
        too_long = [n for n in c["data"]["tasks"]["passkey"]["train_lengths"] if n > length - 1]
        if c[section]["mixture"].get("passkey", 0) > 0 and too_long:
            yield (f"{section}.seq_len",
                   f"must exceed every data.tasks.passkey.train_lengths when the mixture draws passkey rows, "
                   f"got {length} for lengths {too_long}")


def _check_methods(c: dict) -> Iterator[Problem]:
    """Every table cell must be a budget its method reaches exactly on this architecture."""
    methods = c["methods"]
    cells = [(f"methods.table1.{budget}", budget, names) for budget, names in methods["table1"].items()]
    cells += [(f"methods.rank_sweep[{i}]", budget, [RANK_SWEEP_METHOD]) for i, budget in enumerate(methods["rank_sweep"])]
    for key, budget, names in cells:
        if budget not in methods["budgets"]:
            yield key, f"unknown budget label (methods.budgets has {', '.join(methods['budgets'])})"
            continue
        for name in names:
            yield from ((key, message) for message in _cell_problems(c, budget, name))


def _cell_problems(c: dict, budget: str, name: str) -> Iterator[str]:
    """Why KV method `name` cannot be built at budget label `budget` (in methods.budgets) on this
    architecture: its codec's calibration layout is not collected, or no setting reaches the ratio."""
    from loopkv.cache.budget import CacheShape, setting_at_ratio
    from loopkv.cache.registry import codec_layouts
    from loopkv.cache.settings import CACHE_BITS

    methods, arch = c["methods"], c["model"]["arch"]
    shape = CacheShape(arch["num_hidden_layers"], arch["num_attention_heads"], arch["total_ut_steps"],
                       arch["head_dim"])
    ratio = methods["budgets"][budget]
    layout = codec_layouts().get(name)
    if layout is not None and layout not in c["calibration"]["layouts"]:
        yield f"{name} is SVD-initialised from {layout!r} moments: add it to calibration.layouts"
    elif (found := setting_at_ratio(name, shape, ratio, CACHE_BITS[methods["cache_dtype"]], methods["k_share"])) is None:
        yield (f"{name} cannot reach {ratio:g}x with T={shape.loops}, D={shape.layers}, "
               f"H={shape.heads}, d_head={shape.head_dim} and a {methods['cache_dtype']} cache")
    else:   # the method's own keys applied to that setting (lla_decoupled: its rotated dims out of the budget)
        from loopkv.cache.registry import METHODS

        cls = METHODS[name]
        try:
            cls.configured_kwargs(dict(found["kwargs"]), methods, shape)
        except LoopKVError as e:
            yield f"{name} at {budget}: {e}"


RANK_SWEEP_METHOD = "lla"   # LLA Table 8 sweeps the per-head codec's rank


def ablation_variants(c: dict) -> list[str]:
    """LLA Table 10's variants in table order: the recipe (the first that changes nothing), then the
    others (a variant set to null left out); none when distill_ablations.budget is null."""
    ablations = c["distill_ablations"]
    variants = {name: change for name, change in ablations["variants"].items()
                if change is not None and ablations["budget"] is not None}
    recipe = [name for name, change in variants.items() if not change][:1]
    return recipe + [name for name in variants if name not in recipe]


DECOUPLED_METHOD = "lla_decoupled"   # LLA Table 14's method


def decoupled_variants(c: dict) -> list[str]:
    """LLA Table 14's decoupled-RoPE variants in config order (a variant set to null left out); none
    when Table 10 is off (its recipe is Table 14's full-RoPE row, at its budget and schedule), and
    none on Huginn (lla_decoupled does not serve a model with non-looped layers; Table 14 is Ouro's)."""
    if not ablation_variants(c) or c["model"]["family"] == "huginn":
        return []
    return [name for name, change in c["decoupled_rope"]["variants"].items() if change is not None]


def decoupled_methods(c: dict, change: dict) -> dict:
    """The `methods` section as a Table 14 variant sets it (its rope share and query adapter)."""
    return {**c["methods"], "rope_share": change.get("rope_share", c["methods"]["rope_share"]),
            "query_adapter": change.get("query_adapter", c["methods"]["query_adapter"])}


def _check_decoupled_rope(c: dict) -> Iterator[Problem]:
    """LLA Table 14: every variant's rotated dims fit the head and leave a latent at Table 10's budget."""
    if c["distill_ablations"]["budget"] not in c["methods"]["budgets"]:
        return   # _check_distill_ablations names the unknown budget
    recipe = ablation_variants(c)[:1]
    for name in decoupled_variants(c):
        if name in recipe:   # the table names its rows by variant: the full-RoPE row is Table 10's recipe
            yield (f"decoupled_rope.variants.{name}", f"is named as Table 10's recipe ({name!r}), the full-RoPE row "
                                                     f"beside it in Table 14: give it another name")
        change, key = c["decoupled_rope"]["variants"][name], f"decoupled_rope.variants.{name}"
        probe = {**c, "methods": decoupled_methods(c, change)}
        for message in _cell_problems(probe, c["distill_ablations"]["budget"], DECOUPLED_METHOD):
            yield key, message


def eviction_cells(c: dict) -> list[tuple[str, str]]:
    """(method, budget) of LLA Table 9's rows, in config order (a method set to null left out)."""
    return [(method, budget) for method, budget in c["eviction"]["methods"].items() if budget is not None]


def _check_eviction(c: dict) -> Iterator[Problem]:
    """LLA Table 9: methods that free tokens, each at a budget it reaches (the teacher's cache at 1x)."""
    from loopkv.cache.base import LoopCache
    from loopkv.cache.registry import METHODS

    for method, budget in eviction_cells(c):
        key = f"eviction.methods.{method}"
        cls = METHODS.get(method)
        if cls is None:
            yield key, f"unknown KV method (known: {', '.join(METHODS)})"
        elif cls.model_variant:
            yield key, f"{method} is served by a model of its own, not the teacher: Table 9 composes eviction with caches"
        elif not cls.token_stores and cls.keep_tokens is LoopCache.keep_tokens:
            yield key, f"{method} states no per-token stores, so it cannot free evicted tokens"
        elif method == "full" or budget == "1x":
            if (method, budget) != ("full", "1x"):
                yield key, "the teacher's cache (full) runs at 1x, and only it"
        elif budget not in c["methods"]["budgets"]:
            yield key, f"unknown budget label {budget!r} (methods.budgets has {', '.join(c['methods']['budgets'])})"
        else:
            yield from ((key, message) for message in _cell_problems(c, budget, method))


def rank_sweep_cells(c: dict) -> list[tuple[str, str]]:
    """(method, budget) of Table 8's codec rows, in ratio order (the teacher's row is added by the table)."""
    budgets = c["methods"]["budgets"]
    return [(RANK_SWEEP_METHOD, b) for b in sorted(c["methods"]["rank_sweep"], key=lambda b: budgets[b])]


def melt_budget_label(c: dict) -> str | None:
    """The label in methods.budgets whose ratio is T: MELT's fixed budget (one row per layer)."""
    loops = c["model"]["arch"]["total_ut_steps"]
    return next((label for label, ratio in c["methods"]["budgets"].items() if abs(ratio - loops) < 1e-6), None)


def _check_melt(c: dict) -> Iterator[Problem]:
    from loopkv.cache.registry import METHODS, budgeted_methods

    if c["model"]["family"] != "ouro":   # MELT's gate serves looped layers only: a Huginn run builds no MELT job
        return
    melt = c["melt"]
    for stage in ("stage1", "stage2"):
        if melt[stage]["warmup_steps"] > melt[stage]["steps"]:
            yield (f"melt.{stage}.warmup_steps",
                   f"must be <= melt.{stage}.steps ({melt[stage]['steps']}), got {melt[stage]['warmup_steps']}")
    if melt["stage1"]["alpha_ramp_steps"] > melt["stage1"]["steps"]:
        yield ("melt.stage1.alpha_ramp_steps",
               f"must be <= melt.stage1.steps ({melt['stage1']['steps']}), got {melt['stage1']['alpha_ramp_steps']}")
    for name in melt["ablations"]:   # the schema types each ablation's keys and values
        if name == "full":
            yield "melt.ablations.full", "'full' is the recipe itself, not an ablation"
    label = melt_budget_label(c)
    if label is None:
        yield ("methods.budgets", f"needs a budget of {c['model']['arch']['total_ut_steps']}x (= T, MELT's fixed "
               f"budget): MELT and the methods compared with it are evaluated there")
    unknown = [m for m in melt["compare_methods"] if m not in budgeted_methods()]
    if unknown:
        yield ("melt.compare_methods", f"{unknown}: not KV methods MELT is compared with (known: "
                                       f"{', '.join(sorted(budgeted_methods()))}; the teacher is the reference)")
    elif label is not None:
        for name in melt["compare_methods"]:
            yield from (("melt.compare_methods", message) for message in _cell_problems(c, label, name))
    # the teacher's curve is always measured; the others at MELT's budget, codecs from their distilled codec
    unknown = [m for m in melt["memory_methods"] if m not in METHODS or m == "full"]
    if unknown:
        yield ("melt.memory_methods", f"{unknown}: not KV methods measured beside the teacher (known: "
                                      f"{', '.join(sorted(set(METHODS) - {'full'}))}; the teacher is always measured)")
    elif label is not None:
        for name in [m for m in melt["memory_methods"] if m != "melt"]:
            yield from (("melt.memory_methods", message) for message in _cell_problems(c, label, name))


def _check_lm_eval(c: dict) -> Iterator[Problem]:
    """Known task data, each (name, variant) once, a per-group sample only of a task with groups (and
    not beside max_docs), sampling only where the model generates, and (method, budget) pairs that
    the rest of the config can build."""
    from loopkv.data.local_benchmarks import LOCAL_BENCHMARKS
    from loopkv.eval.lm_tasks import LM_TASKS, task_id

    known, seen = {t.data: t for t in LM_TASKS.values()}, set()
    generative = sorted(name for name, t in known.items() if t.generative)
    grouped = sorted(name for name, t in known.items() if t.shot_group is not None)
    for i, task in enumerate(c["lm_eval"]["tasks"]):
        name, variant, where = task["name"], task.get("variant"), f"lm_eval.tasks[{i}]"
        if name not in known:
            yield f"{where}.name", f"unknown task {name!r} (known: {', '.join(sorted(known))})"
        elif (name, variant) in seen:
            yield ((f"{where}.variant", f"task {name!r} variant {variant!r} is listed twice") if variant else
                   (f"{where}.name", f"task {name!r} is listed twice (give one entry a `variant` to run it two ways)"))
        elif task.get("max_docs_per_group") is not None and known[name].shot_group is None:
            yield (f"{where}.max_docs_per_group", f"task {name!r} has no groups of documents to sample from; "
                                                  f"only {', '.join(grouped)} do (BBH's subtasks)")
        elif task.get("max_docs_per_group") is not None and task.get("max_docs") is not None:
            yield (f"{where}.max_docs_per_group", f"cannot be combined with max_docs ({task['max_docs']}): "
                                                  f"set one (max_docs: a sample of the whole set; "
                                                  f"max_docs_per_group: a sample of each group)")
        elif task.get("shots") and name not in FEWSHOT_TASKS:
            yield (f"{where}.shots", f"task {name!r} has no worked examples to show; few-shot "
                                     f"prompts exist for {', '.join(sorted(FEWSHOT_TASKS))}")
        elif task.get("sampling") is not None and not known[name].generative:
            yield (f"{where}.sampling", f"task {name!r} is scored by log-likelihood, nothing is generated to "
                                        f"sample; only generation tasks sample ({', '.join(generative)})")
        elif task.get("sampling") is not None and not variant:
            yield (f"{where}.variant", f"a sampled entry needs a variant label, so that its results "
                                       f"({task_id(name, 'LABEL')}) never read as the greedy run's ({name})")
        elif name in LOCAL_BENCHMARKS and c["data"]["local_benchmarks"].get(name) is None:
            yield (f"{where}.name", f"task {name!r} reads a file you give, and data.local_benchmarks.{name} is "
                                    f"not set: set it to the file's path (formats: config/README.md, "
                                    f"\"Benchmarks from your own files\")")
        seen.add((name, variant))
    yield from _check_served(c, "lm_eval.models")


def table1_benchmark_tasks(c: dict) -> list[str]:
    """The lm_eval.tasks names Table 1's real-benchmark columns read, each run for every Table 1 cell."""
    b = c["methods"]["table1_benchmarks"]
    return [t for t in (b["gsm8k"], *b["mc_avg"], b["mmlu"]) if t]


def _check_table1_benchmarks(c: dict) -> Iterator[Problem]:
    """Each column names a configured lm-eval task of its own kind."""
    from loopkv.data.benchmarks import MC_SUITE

    tasks = {t["name"] for t in c["lm_eval"]["tasks"] if not t.get("variant")}   # the greedy entries
    b = c["methods"]["table1_benchmarks"]
    wanted = [("gsm8k", b["gsm8k"], ("gsm8k",)), ("mmlu", b["mmlu"], ("mmlu",))]
    wanted += [(f"mc_avg[{i}]", name, MC_SUITE) for i, name in enumerate(b["mc_avg"])]
    for key, name, kinds in wanted:
        if name is None:
            continue
        if name not in kinds:
            yield (f"methods.table1_benchmarks.{key}", f"{name!r} is not a task of this column (one of: {', '.join(kinds)})")
        elif name not in tasks:
            yield (f"methods.table1_benchmarks.{key}",
                   f"{name!r} is not in lm_eval.tasks without a variant (its documents, shards and shots come from "
                   f"that entry; Table 1 decodes greedily)")


# the tasks whose data rows carry a worked example ("shot", data/benchmarks.py) for few-shot prompts
FEWSHOT_TASKS = ("gsm8k", "math500", "bbh_gen")   # bbh_gen's shots: the item's own subtask's


def _check_on_policy(c: dict) -> Iterator[Problem]:
    from loopkv.cache.registry import codec_methods

    cfg = c["on_policy"]
    if cfg["method"] not in codec_methods():
        yield "on_policy.method", f"must be a codec method ({', '.join(codec_methods())}), got {cfg['method']!r}"
        return
    for i, budget in enumerate(cfg["budgets"]):
        if budget not in c["methods"]["budgets"]:
            yield f"on_policy.budgets[{i}]", f"unknown budget label {budget!r} (methods.budgets has {', '.join(c['methods']['budgets'])})"
        else:
            yield from ((f"on_policy.budgets[{i}]", message) for message in _cell_problems(c, budget, cfg["method"]))
    if cfg["shots"] and "math_train" not in cfg["prompts"]:
        yield ("on_policy.shots", f"worked examples exist only for math_train's prompts; on_policy.prompts is "
                                  f"{cfg['prompts']} (synthetic prompts take none): set shots to 0")
    if cfg["benchmark"] is not None:
        yield from _check_on_policy_benchmark(c, cfg["benchmark"])


ON_POLICY_BENCHMARKS = ("math500",)   # the paper's Table 4 benchmark (its paper columns are MATH-500's)


def _check_on_policy_benchmark(c: dict, tid: str) -> Iterator[Problem]:
    """Table 4 on a real benchmark: a greedy lm_eval.tasks entry of a task with a final answer."""
    from loopkv.eval.lm_tasks import task_id

    entries = {task_id(t["name"], t.get("variant")): t for t in c["lm_eval"]["tasks"]}
    if tid not in entries:
        yield ("on_policy.benchmark", f"{tid!r} is not an lm_eval.tasks entry (ids: {', '.join(entries) or 'none'}): "
                                      f"its documents, shards, shots and generation budget come from that entry")
    elif entries[tid]["name"] not in ON_POLICY_BENCHMARKS:
        yield ("on_policy.benchmark", f"{tid!r} is not Table 4's benchmark, whose paper columns it sits "
                                      f"beside (one of: {', '.join(ON_POLICY_BENCHMARKS)})")
    elif entries[tid].get("sampling") is not None:
        yield ("on_policy.benchmark", f"{tid!r} samples; Table 4's accuracies are greedy (name the greedy entry)")


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
            yield from ((key, message) for message in _cell_problems(c, budget, method))


def _check_budgets(c: dict) -> Iterator[Problem]:
    """One label per ratio: two labels of one ratio train, evaluate and tabulate the same cells twice
    under two names (and which is MELT's budget would depend on the order)."""
    first: dict[str, float] = {}
    for label, ratio in c["methods"]["budgets"].items():
        same = next((other for other, r in first.items() if math.isclose(r, ratio, rel_tol=1e-6)), None)
        if same is not None:
            yield f"methods.budgets.{label}", f"has the ratio of '{same}' ({ratio:g}x): one label per ratio"
        else:
            first[label] = ratio


def _check_loop_depths(c: dict) -> Iterator[Problem]:
    """The teacher's other test-time depths: its own is its evaluation already."""
    own = c["model"]["arch"]["total_ut_steps"]
    if own in c["teacher_eval"]["loop_depths"]:
        yield ("teacher_eval.loop_depths", f"holds the model's own depth (model.arch.total_ut_steps = {own}): "
               "the teacher's evaluation is at it already; list the other depths")


def _check_distill_ablations(c: dict) -> Iterator[Problem]:
    """LLA Table 10: a budget LLA reaches (with each variant's K share), the recipe's row first."""
    ablations = c["distill_ablations"]
    variants = {name: change for name, change in ablations["variants"].items() if change is not None}
    if not variants or ablations["budget"] is None:
        return
    budget = ablations["budget"]
    if budget not in c["methods"]["budgets"]:
        yield ("distill_ablations.budget",
               f"unknown budget label {budget!r} (methods.budgets has {', '.join(c['methods']['budgets'])})")
        return
    if not any(not change for change in variants.values()):
        yield ("distill_ablations.variants", "no variant is the recipe every other is compared with: add one that "
                                             "changes nothing (e.g. full: {})")
    for name, change in variants.items():
        probe = {**c, "methods": {**c["methods"], "k_share": change.get("k_share", c["methods"]["k_share"])}}
        for message in _cell_problems(probe, budget, RANK_SWEEP_METHOD):
            yield f"distill_ablations.variants.{name}", message


def _check_exit_prior(c: dict) -> Iterator[Problem]:
    """A prior over Ouro's exit loops: one weight a loop, on a model with an exit gate."""
    prior, loops = c["teacher"]["exit_prior"], c["model"]["arch"]["total_ut_steps"]
    if prior is None:
        return
    if c["model"]["family"] != "ouro":
        yield "teacher.exit_prior", f"is a prior over Ouro's exit gate; a {c['model']['family']} model has none: set it to null"
    elif len(prior) != loops:
        yield ("teacher.exit_prior", f"needs one weight per loop (model.arch.total_ut_steps = {loops}), "
                                     f"got {len(prior)}")


def _check_generation(c: dict) -> Iterator[Problem]:
    """Generation budgets within the model's positions and the rows that hold them."""
    max_pos = c["model"]["arch"]["max_position_embeddings"]
    where = f"model.arch.max_position_embeddings ({max_pos})"
    for section in ("teacher_eval", "method_eval"):
        n = c[section]["arithmetic_max_new_tokens"]
        if n >= max_pos:
            yield f"{section}.arithmetic_max_new_tokens", f"must be < {where}: the prompt needs positions too, got {n}"
    for i, task in enumerate(c["lm_eval"]["tasks"]):
        n = task["max_gen_toks"]
        if n is not None and n >= max_pos:
            yield (f"lm_eval.tasks[{i}].max_gen_toks",
                   f"must be < {where}: lm-eval keeps max_length - max_gen_toks context tokens, got {n}")
    on_policy = c["on_policy"]
    if on_policy["max_new_tokens"] >= on_policy["seq_len"]:
        yield ("on_policy.max_new_tokens",
               f"must be < on_policy.seq_len ({on_policy['seq_len']}), the row that holds prompt + generation "
               f"(tokens past it are cut), got {on_policy['max_new_tokens']}")
    serve = c["serve"]
    if serve["prompt_len"] + serve["new_tokens"] > max_pos:
        yield ("serve.new_tokens", f"serve.prompt_len + serve.new_tokens must be <= {where}, "
                                   f"got {serve['prompt_len']} + {serve['new_tokens']}")


def _check_kernel(c: dict) -> Iterator[Problem]:
    """A latent of the kernel benchmark encodes one head's T loops (width T x d_head): no wider."""
    kernel, loops = c["serve"]["kernel"], c["model"]["arch"]["total_ut_steps"]
    width = loops * kernel["head_dim"]
    for rank in ("r_k", "r_v"):
        if kernel[rank] > width:
            yield (f"serve.kernel.{rank}",
                   f"must be <= T x serve.kernel.head_dim ({loops} x {kernel['head_dim']} = {width}): a latent wider "
                   f"than the cross-loop vector it encodes compresses nothing, got {kernel[rank]}")
    # the absorbed read at the same budget: the rotated share of the head out of r_k + r_v
    d_rope = 2 * round(c["methods"]["rope_share"] * kernel["head_dim"] / 2)
    if not 2 <= d_rope < kernel["head_dim"] or kernel["r_k"] + kernel["r_v"] - d_rope < 2:
        yield ("methods.rope_share",
               f"keeps {d_rope} of serve.kernel.head_dim {kernel['head_dim']} dims rotated for Table 13's absorbed read: "
               f"it must keep a pair, leave content dims, and leave 2 or more of r_k + r_v = "
               f"{kernel['r_k'] + kernel['r_v']} values for its latents")


def _check_paper_models(c: dict) -> Iterator[Problem]:
    for name, arch in c["serve"]["paper"]["models"].items():
        kv = arch.get("num_key_value_heads", arch["num_attention_heads"])
        if arch["num_attention_heads"] % kv:
            yield (f"serve.paper.models.{name}.num_key_value_heads",
                   f"must divide num_attention_heads ({arch['num_attention_heads']}), got {kv}")


def _check_jobs(c: dict) -> Iterator[Problem]:
    """Shards that hold documents, and a DAG Snakemake can hold in memory."""
    from loopkv.eval.lm_tasks import task_id as lm_task_id

    lm, grid = c["lm_eval"], c["passkey_grid"]
    for i, task in enumerate(lm["tasks"]):
        # a per-group sample's size (sum over groups of min(max_docs_per_group, group size)) needs the
        # data: the shard job checks it (lm_commands), as it does the whole set's
        if task["max_docs"] is not None and task["shards"] > task["max_docs"]:
            yield (f"lm_eval.tasks[{i}].shards",
                   f"must be <= max_docs ({task['max_docs']}): a shard needs a document, got {task['shards']}")
    cells = len(grid["lengths"]) * len(grid["depths"]) * grid["trials"]
    if grid["shards"] > cells:
        yield ("passkey_grid.shards",
               f"must be <= the grid's examples (lengths x depths x trials = {cells}), got {grid['shards']}")
    suite = len(lm["models"]) * sum(t["shards"] for t in lm["tasks"]) if lm["tasks"] else 0
    # Table 1's benchmark columns: their tasks for every Table 1 cell that lm_eval.models does not serve
    shards = {t["name"]: t["shards"] for t in lm["tasks"] if not t.get("variant")}   # Table 1's: the greedy entries
    served = set(lm["models"])
    cells = {"full/1x"} | {f"{m}/{b}" for b, names in c["methods"]["table1"].items() for m in names}
    table1 = len(cells - served) * sum(shards.get(t, 0) for t in table1_benchmark_tasks(c))
    # Table 4 on a benchmark: every on-policy codec, and the off-policy ones lm_eval.models does not serve
    op = c["on_policy"]
    bench = {lm_task_id(t["name"], t.get("variant")): t["shards"] for t in lm["tasks"]}.get(op["benchmark"], 0)
    table4 = bench * (len(op["budgets"]) + len({f"{op['method']}/{b}" for b in op["budgets"]} - served))
    grid_jobs = len(grid["models"]) * grid["shards"]
    planned = suite + table1 + table4 + grid_jobs
    if planned > MAX_LM_EVAL_JOBS:
        key = max((suite, "lm_eval.tasks"), (table1, "methods.table1_benchmarks"), (table4, "on_policy.benchmark"),
                  (grid_jobs, "passkey_grid.shards"))[1]
        yield (key, f"plans {planned} lm-eval shard jobs (lm_eval.models x the tasks' shards + the other Table 1 "
                    f"cells x their benchmarks' shards + Table 4's codecs x its benchmark's shards + "
                    f"passkey_grid.models x passkey_grid.shards); at most "
                    f"{MAX_LM_EVAL_JOBS}: Snakemake holds every job in memory")


_SEMANTIC_CHECKS: list[Callable[[dict], Iterator[Problem]]] = [
    _check_corpus, _check_tokenizer, _check_tasks, _check_model, _check_windows, _check_schedules,
    _check_packed_rows, _check_launch, _check_budgets, _check_methods, _check_melt, _check_lm_eval,
    _check_table1_benchmarks,
    _check_passkey_grid, _check_on_policy, _check_serve, _check_generation, _check_loop_depths, _check_kernel,
    _check_exit_prior, _check_distill_ablations, _check_decoupled_rope, _check_eviction,
    _check_paper_models, _check_jobs,
]


def semantic_problems(config: dict) -> Iterator[Problem]:
    """Unknown names, else the cross-key problems, of a schema-valid, complete config (the cross-key
    checks look names up, as the schema's checks gate the types they rely on)."""
    unknown = list(_check_names(config))
    if unknown:
        yield from unknown
        return
    for check in _SEMANTIC_CHECKS:
        yield from check(config)


def _kind(path: Path) -> str:
    """'dir', 'file', 'other' (a device, a socket), 'missing', or 'under FILE' (a missing path below
    an existing non-directory, which nothing can create)."""
    try:
        if path.is_dir():
            return "dir"
        if path.is_file():
            return "file"
        if path.exists():
            return "other"
        for ancestor in path.parents:
            if ancestor.exists():
                return "missing" if ancestor.is_dir() else f"under {ancestor}"
    except OSError as e:   # e.g. a name longer than the file system allows
        return f"unusable ({e.strerror or e})"
    return "missing"


def _path_problems(c: dict, base: Path) -> list[Problem]:
    """The files and directories the config reads: there, and of their kind."""
    problems: list[Problem] = []

    def want(key: str, path: Path, kind: str, what: str) -> bool:
        found = _kind(path)
        if found == kind:
            return True
        if found == "missing":
            problems.append((key, f"{what} does not exist: {path}"))
        elif found.startswith("under "):
            problems.append((key, f"{what} does not exist: {path} (below {found[6:]}, which is a file)"))
        elif found.startswith("unusable"):
            problems.append((key, f"{what} cannot be used: {path}: {found[9:-1]}"))
        else:
            names = {"dir": "directory", "file": "file", "other": "special file"}
            problems.append((key, f"{what} must be a {names[kind]}, but {path} is a {names[found]}"))
        return False

    model_path = c["model"]["path"]
    if model_path is not None and want("model.path", base / model_path, "dir", "checkpoint directory"):
        p = base / model_path
        if not (p / "config.json").is_file():
            problems.append(("model.path", f"checkpoint directory has no config.json: {p}"))
        elif c["model"]["source"] == "pretrained":
            problems += _checkpoint_problems(c, p / "config.json")
    tok_path = c["data"]["tokenizer"]["path"]
    if tok_path is not None:   # a tokenizers-format directory (tokenizer.json), as a checkpoint ships
        want("data.tokenizer.path", base / tok_path, "dir", "tokenizer directory")
    for i, name in enumerate(c["data"]["corpus"]["text_files"]):
        want(f"data.corpus.text_files[{i}]", base / name, "file", "text file")
    for i, name in enumerate(c["serve"]["kernel"]["measured"]):
        want(f"serve.kernel.measured[{i}]", base / name, "file", "kernel result")
    problems += _local_benchmark_problems(c, base)
    problems += _bigbench_problems(c, base, want)
    return problems


def _bigbench_problems(c: dict, base: Path, want) -> list[Problem]:
    """BBH's two tasks read PyPI bigbench 1.0.0's sdist: when a task of lm_eval.tasks reads it, the file
    data.bigbench_sdist names, or (null) the environment's copy, must be there (an overlay that drops
    BBH's tasks needs no copy)."""
    from loopkv.data.benchmarks import BENCHMARKS
    from loopkv.data.bigbench import CONFIG_KEY, SDIST, sdist_path

    readers = [(i, t["name"]) for i, t in enumerate(c["lm_eval"]["tasks"])
               if t["name"] in BENCHMARKS and BENCHMARKS[t["name"]].source_key == CONFIG_KEY]
    if not readers:
        return []
    i, name = readers[0]
    named = c["data"]["bigbench_sdist"]
    if named is not None:
        want(CONFIG_KEY, base / named, "file", f"BIG-bench sdist ({SDIST}, read by lm_eval.tasks[{i}] {name!r})")
        return []
    if sdist_path().is_file():
        return []
    return [(f"lm_eval.tasks[{i}].name",
             f"task {name!r} reads BBH's source tasks from PyPI bigbench 1.0.0's sdist ({SDIST}): "
             f"{CONFIG_KEY} is null and this environment has no copy at {sdist_path()} (`loopkv fetch-bigbench` "
             f"puts one there, but PyPI no longer serves the file). Set {CONFIG_KEY} to a copy's path, or drop the task")]


def _local_benchmark_problems(c: dict, base: Path) -> list[Problem]:
    """Every file data.local_benchmarks names: there, and every row of it in its benchmark's format
    (read now, so a malformed file stops the run before any job, naming the line and field)."""
    from loopkv.data.local_benchmarks import LOCAL_BENCHMARKS, file_problem

    problems: list[Problem] = []
    for name, path in c["data"]["local_benchmarks"].items():
        if path is None or name not in LOCAL_BENCHMARKS:   # an unknown name is reported by _check_names
            continue
        key, found = f"data.local_benchmarks.{name}", _kind(base / path)
        if found != "file":
            what = {"missing": "does not exist", "dir": "is a directory, not a file"}.get(found, f"cannot be used ({found})")
            problems.append((key, f"the {name} file {base / path} {what}"))
            continue
        problem = file_problem(name, base / path)
        if problem is not None:
            problems.append((key, problem))
    return problems


def _dir_problems(c: dict, base: Path) -> list[Problem]:
    """The directories every job writes into: each a directory, or creatable as one (not an existing
    file, not below one), checked before Snakemake builds the DAG (which fails on them with a traceback)."""
    problems: list[Problem] = []
    for key in ("results_dir", "reports_dir", "logs_dir"):
        path = base / c[key]
        found = _kind(path)
        if found in ("dir", "missing"):
            continue
        if found.startswith("under "):
            problems.append((key, f"cannot be created: {path} is below {found[6:]}, which is a file"))
        elif found.startswith("unusable"):
            problems.append((key, f"cannot be used: {path}: {found[9:-1]}"))
        else:
            problems.append((key, f"must be a directory, but {path} is a {'file' if found == 'file' else 'special file'}"))
    return problems


def _checkpoint_problems(c: dict, config_json: Path) -> list[Problem]:
    """A pretrained checkpoint decides its architecture: its model_type must be model.family's, and every
    model.arch (model.huginn) key its config.json states, under the family's field name, must equal it
    (budgets, MELT's label and the serving models read model.arch), and so must the vocabulary
    data.tokenizer.vocab_size names."""
    try:
        shipped = json.loads(config_json.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [("model.path", f"{config_json} is not readable JSON ({type(e).__name__}: {e})")]
    if not isinstance(shipped, dict):
        return [("model.path", f"{config_json} is not a JSON object")]
    from loopkv.models.families import CHECKPOINT_FIELDS, MODEL_TYPES

    family = c["model"]["family"]
    if "model_type" in shipped and shipped["model_type"] != MODEL_TYPES[family]:
        return [("model.family", f"is {family!r} (model_type {MODEL_TYPES[family]!r}) but the checkpoint's config.json "
                                 f"({config_json}) has model_type {shipped['model_type']!r}")]
    problems: list[Problem] = []
    # Ouro's config.json uses loopkv's names; Huginn's its own
    fields = CHECKPOINT_FIELDS.get(family) or {f"arch.{k}": k for k in c["model"]["arch"]}
    for key, field in fields.items():
        section, name = key.split(".")
        value = c["model"][section][name]
        if field in shipped and shipped[field] != value:
            shown = "" if field == name else f"{field} = "
            problems.append((f"model.{key}", f"is {_show(value)} but the checkpoint's config.json "
                                             f"({config_json}) has {shown}{_show(shipped[field])}"))
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
