"""Two reports that measure one quantity must agree: Table 1's method evaluation and the lm-eval
suite (Table 7) score the synthetic tasks of the same (method, budget) on the same test files with
the same greedy decoding or log-likelihoods. A disagreement means one of them read something else
(another method's cache, other weights, other items): the check fails naming both files.

Compared only when it is the same measurement: both results name the same task file (sha256) and
model files (teacher, codec or student hashes) in their provenance, ran on the same kind of
device, gave arithmetic the same generation budget, and scored the same number of items;
otherwise the pair is reported as not comparable, with why. Agreement allows TOLERANCE of the
items to differ (at least one): the two paths batch differently (lm-eval orders requests by
length), so a greedy near-tie can fall either way on a single item; what a wrong cache or wrong
weights changes is many items (the bug this guards against turned recall 1.00 into 0.00).
The passkey grid (Figure 8) is not compared with Table 1's passkey: it draws other items at other
lengths, so the two differ by sampling and only an interval comparison could relate them.
"""
from __future__ import annotations

import math
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import read_json

# task -> (Table 1's metric, lm-eval's metric) pairs measuring the same thing
SAME_QUANTITIES = {
    "arithmetic": (("exact_match", "exact_match"),),
    "passkey": (("accuracy", "accuracy"),),
    "cloze": (("accuracy", "acc"), ("accuracy_norm", "acc_norm")),
}
MODEL_FILES = ("teacher", "codec", "student")
TOLERANCE = 0.05   # of the items, at least one (see above)
# lm-eval's arithmetic template budget when the suite's task sets none (lm_tasks/arithmetic.yaml)
LM_ARITHMETIC_DEFAULT_BUDGET = 64


def _read(path: Path) -> dict:
    return read_json(path, "result", {})


def _field(data: dict, path: Path, *keys):
    value = data
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise LoopKVError(f"{path}: no {'.'.join(keys)} in this result")
        value = value[key]
    return value


def _hash(entry, path: Path, name: str) -> str:
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        raise LoopKVError(f"{path}: provenance input {name!r} has no sha256")
    return entry["sha256"]


def _method_eval_inputs(data: dict, path: Path, task: str) -> tuple[str, dict]:
    inputs = _field(data, path, "provenance", "inputs")
    if not isinstance(inputs, dict) or f"task:{task}" not in inputs:
        raise LoopKVError(f"{path}: its provenance names no task:{task} input")
    models = {k: _hash(inputs[k], path, k) for k in MODEL_FILES if k in inputs}
    return _hash(inputs[f"task:{task}"], path, f"task:{task}"), models


def _device_kind(block) -> str | None:
    device = block.get("device") if isinstance(block, dict) else None
    return device.split(":")[0] if isinstance(device, str) else None


def _shard_blocks(data: dict, path: Path) -> list[dict]:
    shards = _field(data, path, "provenance", "merged_from")
    if not isinstance(shards, dict) or not shards or not all(isinstance(b, dict) for b in shards.values()):
        raise LoopKVError(f"{path}: its provenance lists no merged shards")
    return list(shards.values())


def _protocol_differences(a: dict, b: dict, method_eval: Path, lm_eval: Path, task: str) -> str | None:
    shards = _shard_blocks(b, lm_eval)
    a_device, b_devices = _device_kind(a.get("provenance")), {_device_kind(s) for s in shards}
    if b_devices != {a_device}:
        return f"different devices ({a_device} vs {sorted(map(str, b_devices))})"
    if task == "arithmetic":
        ours = a["provenance"].get("config", {}).get("method_eval", {}).get("arithmetic_max_new_tokens")
        theirs = set()
        for s in shards:
            budget = s.get("config", {}).get("lm_eval", {}).get("tasks", {}).get("arithmetic", {}).get("max_gen_toks")
            theirs.add(LM_ARITHMETIC_DEFAULT_BUDGET if budget is None else budget)
        if theirs != {ours}:
            return f"different generation budgets ({ours} vs {sorted(map(str, theirs))} tokens)"
    return None


def _lm_eval_inputs(data: dict, path: Path) -> tuple[str, dict]:
    """A merged result's shards must all have read one task file and one set of model files."""
    seen = set()
    for block in _shard_blocks(data, path):
        inputs = block.get("inputs")
        if not isinstance(inputs, dict) or "data" not in inputs:
            raise LoopKVError(f"{path}: a merged shard names no data input")
        models = tuple(sorted((k, _hash(inputs[k], path, k)) for k in MODEL_FILES if k in inputs))
        seen.add((_hash(inputs["data"], path, "data"), models))
    if len(seen) != 1:
        raise LoopKVError(f"{path}: its shards read different data or model files")
    data_hash, models = seen.pop()
    return data_hash, dict(models)


def compare(method_eval: Path, lm_eval: Path, task: str) -> list[dict]:
    """One row per shared quantity: status agree | disagree | not_comparable."""
    a, b = _read(method_eval), _read(lm_eval)
    base = {"method_eval": str(method_eval), "lm_eval": str(lm_eval), "task": task}
    ours_cell = tuple(_field(a, method_eval, "metrics", k) for k in ("method", "budget"))
    if ours_cell != tuple(_field(b, lm_eval, k) for k in ("method", "budget")):
        return [{**base, "status": "not_comparable", "why": "different (method, budget)"}]
    if not isinstance(a["metrics"].get(task), dict):
        return [{**base, "status": "not_comparable", "why": f"Table 1's cell does not measure {task}"}]
    a_data, a_models = _method_eval_inputs(a, method_eval, task)
    b_data, b_models = _lm_eval_inputs(b, lm_eval)
    ours = _field(a, method_eval, "metrics", task)
    n_a, n_b = _field(ours, method_eval, "n"), _field(b, lm_eval, "n")
    why = ("different task files" if a_data != b_data else "different model files" if a_models != b_models
           else f"different item counts ({n_a} vs {n_b})" if n_a != n_b
           else _protocol_differences(a, b, method_eval, lm_eval, task))
    if why:
        return [{**base, "status": "not_comparable", "why": why}]
    rows = []
    for ours_key, theirs_key in SAME_QUANTITIES[task]:
        x, y = _field(ours, method_eval, ours_key), _field(b, lm_eval, "metrics", theirs_key)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
            raise LoopKVError(f"{method_eval} / {lm_eval}: {task} {ours_key} / {theirs_key} must be numbers")
        # correct counts of the same items (the means' float sums may differ in the last bits)
        differ = abs(round(x * n_a) - round(y * n_b))
        allowed = max(1, math.ceil(TOLERANCE * n_a))
        rows.append({**base, "quantity": ours_key, "method_eval_value": x, "lm_eval_value": y, "n": n_a,
                     "items_differ": differ, "items_allowed": allowed,
                     "status": "agree" if differ <= allowed else "disagree"})
    return rows


def task_of(lm_eval: Path) -> str:
    """lm_eval/{method}/{budget}/{task}.json"""
    task = Path(lm_eval).stem
    if task not in SAME_QUANTITIES:
        raise LoopKVError(f"{lm_eval}: {task!r} is not a task Table 1 also measures ({sorted(SAME_QUANTITIES)})")
    return task


def check(pairs: list[tuple[Path, Path]]) -> dict:
    rows = [row for quality, lm in pairs for row in compare(Path(quality), Path(lm), task_of(lm))]
    return {"rows": rows, "agree": sum(r["status"] == "agree" for r in rows),
            "disagree": sum(r["status"] == "disagree" for r in rows),
            "not_comparable": sum(r["status"] == "not_comparable" for r in rows)}


def disagreements_message(report: dict) -> str:
    lines = [f"{r['task']} {r['quantity']}: {r['method_eval_value']:.4f} in {r['method_eval']} but "
             f"{r['lm_eval_value']:.4f} in {r['lm_eval']} (n={r['n']}: {r['items_differ']} items differ, "
             f"{r['items_allowed']} allowed)"
             for r in report["rows"] if r["status"] == "disagree"]
    return "two reports disagree on the same measurement:\n  " + "\n  ".join(lines)
