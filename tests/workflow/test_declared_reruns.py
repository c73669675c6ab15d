"""Edit every config key of the micro config, one at a time, and ask Snakemake (a dry run on the
finished micro DAG) what it would rerun: exactly the jobs whose declaration (loopkv.jobs JobSpec)
reads that key, and what depends on them. Generated from the declarations and the config, so keys
and jobs added later are covered. Resource keys (every threads key, launch.*) rerun nothing.

A key a job reads through a View (a computed slice entry: one MELT recipe's stage settings, one
lm-eval task's settings) may rerun that job: the view narrows what it passes. A key that changes
the DAG itself (which cells, tasks or recipes exist) adds jobs; those are reported apart."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from inprocess_dag import dag_jobs, dag_state, needrun
from loopkv.config import load_schema, load_workflow_config
from loopkv.errors import LoopKVError
from loopkv.jobs.declared import job_spec
from loopkv.jobs.slices import declared_paths, is_resource

pytestmark = pytest.mark.slow


def leaves(node, path=()):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, (*path, str(k)))
    else:
        yield path, node


def schema_at(schema, path):
    node = schema
    for part in path:
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    return node


def edits(path, value, rule):
    """Candidate new values for one leaf, most conservative first, inside its schema bounds."""
    if isinstance(value, bool):
        return [not value]
    if "enum" in rule:
        return [v for v in rule["enum"] if v != value]
    if isinstance(value, int):
        lo, hi = rule.get("minimum", -2**31), rule.get("maximum", 2**31)
        return [v for v in (value + 1, value - 1, value * 2) if lo <= v <= hi and v != value]
    if isinstance(value, float):
        return [v for v in (value * 0.5, value * 1.1, value + 0.1, 0.5) if v != value]
    if isinstance(value, str) and path[-1] == "gate":   # MELT's gate names live in their registry
        from loopkv.models.melt_gate import VARIANTS

        return [v for v in VARIANTS if v != value]
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [value[:-1], [*value[:-1], value[-1] + 1]] if len(value) > 1 else [[value[0] + 1]]
    if isinstance(value, list) and len(value) > 1:
        return [value[:-1]]   # one item fewer: a cell, task or method less
    if isinstance(value, str) and value in CONFIG["methods"]["budgets"]:   # a budget label: another one
        return [b for b in CONFIG["methods"]["budgets"] if b != value]
    if value is None:
        return _edits_of_null(path, rule)
    return []


def _edits_of_null(path, rule):
    """A null leaf (a default left unset, an entry dropped by the micro config): the default
    config's value where it has one, else a value of the type the schema allows."""
    default = load_workflow_config([], check_paths=False, base_dir=Path(__file__).resolve().parents[2])
    for part in path:
        default = default.get(part) if isinstance(default, dict) else None
    if default is not None:
        return [default]   # e.g. a Table 10 variant the micro config drops
    if path[-1] == "exit_prior":   # one weight per loop
        return [[float(i + 1) for i in range(CONFIG["model"]["arch"]["total_ut_steps"])]]
    types = rule.get("type", [])
    return [EDITED_PATH] if "string" in types else []


EDITED_PATH = "downloads/edited.tar.gz"   # a file path where one was null: accepted only where no check reads it


def job_reads(rule, wildcards: dict):
    """(paths it reads, paths its views depend on, paths it skips) of one job, from its rule's
    declared command; None for a rule that runs no declared command."""
    cfg_param = dict(rule.params.items()).get("cfg")
    command = getattr(cfg_param, "command", None)
    if command is None:
        return None
    spec = job_spec(command)
    plain, viewed = declared_paths(spec, CONFIG, {**wildcards, **cfg_param.fixed})
    return plain, viewed, [tuple(k.split(".")) for k in spec.skip]


def reads_key(declared, path, skip=()) -> bool:
    return any(path[:len(d)] == d for d in declared) and not any(path[:len(s)] == s for s in skip)


CONFIG: dict = {}


def test_each_key_reruns_exactly_the_jobs_that_declare_it(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    CONFIG.clear()
    CONFIG.update(load_workflow_config([finished / "micro.yaml"], check_paths=False))
    schema = load_schema()
    graph = job_graph(*dag_jobs(finished, finished / "micro.yaml"))
    assert needrun(finished, finished / "micro.yaml") == {}

    report = {"exact": [], "view": [], "structural": [], "not_editable": []}
    for path, value in leaves(CONFIG):
        key = ".".join(path)
        if key in ("results_dir", "reports_dir", "logs_dir") or path[0] == "serve" and path[1:2] == ("kernel",) \
                and path[2:3] == ("measured",):
            continue   # where outputs go (everything moves) and Table 13's input files
        edited = None
        for candidate in edits(path, value, schema_at(schema, path)):
            trial = json.loads(json.dumps(micro))
            _set(trial, path, candidate)
            try:   # a path put where a null was must pass the checks of the paths a run reads
                load_workflow_config([_write(finished, trial)], check_paths=candidate == EDITED_PATH,
                                     base_dir=finished)
            except LoopKVError:
                continue
            edited = trial
            break
        if edited is None:
            report["not_editable"].append(key)
            continue
        needed, dag = dag_state(finished, _write(finished, edited))
        planned = set(needed) - {("all", "")}
        if is_resource(path):
            assert planned == set(), (key, planned)
            report["exact"].append(key)
            continue
        must = {job for job, (plain, _, skip) in graph["reads"].items() if reads_key(plain, path, skip)}
        may = {job for job, (_, viewed, skip) in graph["reads"].items() if reads_key(viewed, path, skip)}
        must_closure, may_closure = graph["closure"](must), graph["closure"](must | may)
        edited_graph = job_graph(*dag)
        if edited_graph["upstream"] != graph["upstream"]:
            # the edit adds, removes or rewires jobs: what reruns must read the key or be new, or
            # have other inputs now, or consume one of those
            report["structural"].append(key)
            changed = {job for job, up in edited_graph["upstream"].items() if graph["upstream"].get(job) != up}
            allowed = edited_graph["closure"](must | may | changed)
            assert planned <= allowed, (key, sorted(planned - allowed))
            continue
        assert must_closure <= planned <= may_closure, (
            key, {"not rerun": sorted(must_closure - planned), "rerun without reading it": sorted(planned - may_closure)})
        report["exact" if planned == must_closure else "view"].append(key)
    print(json.dumps({k: len(v) for k, v in report.items()}), report["not_editable"], report["structural"])
    assert len(report["exact"]) > 100
    assert len(report["not_editable"]) < 30


def job_graph(jobs: dict, dependants: dict) -> dict:
    """Every job of the DAG (by rule and wildcards; finished or not; inprocess_dag.dag_jobs), what
    it reads by declaration, and its dependants."""
    reads = {}
    for job, (rule, wildcards) in jobs.items():
        declared = job_reads(rule, wildcards)
        if declared is not None:
            reads[job] = declared

    def closure(start):
        seen, todo = set(start), list(start)
        while todo:
            for nxt in dependants.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen - {("all", "")}

    upstream = {job: set() for job in jobs}
    for job, consumers in dependants.items():
        for consumer in consumers:
            upstream.setdefault(consumer, set()).add(job)
    return {"jobs": set(jobs), "reads": reads, "closure": closure, "upstream": upstream}


def _set(cfg, path, value):
    node = cfg
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


def _write(workdir: Path, cfg: dict) -> Path:
    out = workdir / "edited.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return out
