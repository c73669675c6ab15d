"""A job's config slice, built from its declaration alone: the keys it reads and nothing else.

The rule passes the slice as params, so editing a key reruns exactly the jobs that read it;
resource keys (spec.RESOURCE_KEYS) are left out of every slice, so a threads or launch edit
reruns nothing. The command receives the same slice (--cfg) and can read nothing else."""
from __future__ import annotations

import copy
import importlib
from typing import Any, Mapping

from loopkv.errors import LoopKVError
from loopkv.jobs.spec import NOT_READ, RESOURCE_KEYS, JobSpec, MethodKeys, View

# every KV method's job reads these (the stored dtype sizes its bytes; the K/V share splits a budget)
SHARED_METHOD_KEYS = ("methods.cache_dtype", "methods.k_share")
TEACHER_BUDGET = "1x"   # the teacher's own label: no methods.budgets entry


Path = tuple[str, ...]   # a key as its parts: a budget label such as 5.33x holds a dot


def job_slice(spec: JobSpec, config: Mapping, wildcards: Mapping[str, Any] | None = None) -> dict:
    """The nested subset of `config` that `spec` declares, views computed, resources left out."""
    wildcards = dict(wildcards or {})
    sliced: dict = {}
    for read in spec.reads:
        if isinstance(read, MethodKeys):
            if wildcards.get("budget", TEACHER_BUDGET) == TEACHER_BUDGET:
                _put(sliced, ("methods", "budgets"), {})   # the teacher's cache reads no budget
            for path in method_paths(read, config, wildcards):
                _put(sliced, path, _value(spec, config, path))
        elif isinstance(read, View):
            at, value = _split(read.at), view_function(read)(config, **wildcards)
            if value is NOT_READ:
                continue
            _put(sliced, at, _pruned(value, at, ()))   # no resources here either
        else:
            path = _fill(spec, read, wildcards)
            _put(sliced, path, _value(spec, config, path))
    return sliced


def declared_paths(spec: JobSpec, config: Mapping, wildcards: Mapping[str, Any]) -> tuple[list[Path], list[Path]]:
    """(the keys a job reads directly, the keys its views depend on), as paths. A key a View writes
    over (a variant's K share at methods.k_share) is read through the view: its edit may rerun the job."""
    plain, viewed = [], []
    for read in spec.reads:
        if isinstance(read, MethodKeys):
            plain += method_paths(read, config, dict(wildcards))
        elif isinstance(read, View):
            viewed += [_fill(spec, d, wildcards) for d in read.depends]
        else:
            plain.append(_fill(spec, read, wildcards))
    written = [_split(r.at) for r in spec.reads if isinstance(r, View)]
    overwritten = [p for p in plain if any(p[:len(w)] == w for w in written)]
    return [p for p in plain if p not in overwritten], viewed + overwritten


def method_paths(read: MethodKeys, config: Mapping, wildcards: dict) -> list[Path]:
    """The `methods` keys of the method(s) `read` names, from their classes' declarations."""
    from loopkv.cache.registry import METHODS

    if read.source.startswith("{"):
        names = [read.source.format(**wildcards)]
    else:
        names = list(_get(config, _split(read.source), read.source))
    budget = wildcards.get("budget", TEACHER_BUDGET)
    paths = [] if budget == TEACHER_BUDGET else [("methods", "budgets", str(budget))]
    keys = list(SHARED_METHOD_KEYS)
    for name in names:
        if name not in METHODS:
            raise LoopKVError(f"unknown KV method {name!r} (known: {', '.join(sorted(METHODS))})")
        cls = METHODS[name]
        keys += getattr(cls, "config_keys", ())
        if read.served:
            keys += getattr(cls, "served_config_keys", ())
    paths += [_split(k) for k in keys]
    return list(dict.fromkeys(paths))


def view_function(view: View):
    module, _, name = view.fn.partition(":")
    return getattr(importlib.import_module(module), name)


def is_resource(path: tuple[str, ...]) -> bool:
    return any(_matches(pattern, path) for pattern in RESOURCE_KEYS)


def _matches(pattern: str, path: tuple[str, ...]) -> bool:
    """Whether `path` is the key `pattern` names or lies under it (`*` matches one key)."""
    parts = pattern.split(".")
    return len(path) >= len(parts) and all(p in ("*", k) for p, k in zip(parts, path))


def _split(key: str) -> Path:
    return tuple(key.split("."))


def _fill(spec: JobSpec, key: str, wildcards: Mapping) -> Path:
    """A declared key's parts, each `{wildcard}` filled (a filled value may hold a dot)."""
    try:
        return tuple(part.format(**wildcards) for part in _split(key))
    except KeyError as e:
        raise LoopKVError(f"{spec.command}: config key {key!r} names wildcard {e}, which the job has not") from None


def _get(config: Mapping, path: Path, what: str):
    node: Any = config
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            raise LoopKVError(f"{what}: the config has no key {'.'.join(path)!r}")
        node = node[part]
    return node


def _value(spec: JobSpec, config: Mapping, path: Path):
    """The value at `path`, without resource keys or the spec's skipped keys under it."""
    if is_resource(path):
        raise LoopKVError(f"{spec.command} declares {'.'.join(path)!r}, a resource key: resources are never part of a slice")
    return _pruned(copy.deepcopy(_get(config, path, spec.command)), path, spec.skip)


def _pruned(node, path: Path, skip: tuple[str, ...]):
    if not isinstance(node, dict):
        return node
    kept = {}
    for k, v in node.items():
        sub = (*path, str(k))
        if is_resource(sub) or any(_split(s) == sub for s in skip):
            continue
        kept[k] = _pruned(v, sub, skip)
    return kept


def _put(sliced: dict, path: Path, value) -> None:
    node = sliced
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
