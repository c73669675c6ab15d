"""One loopkv lm-eval task on a shard of its documents, through lm-eval's Python API, and the merge
of shards into the result an unsharded run gives.

A shard result keeps every document's metric values (lm-eval's logged samples), so merging is the
mean over the union of documents, in document order: the same numbers lm-eval's own aggregation
gives on the whole selection (tested). lm-eval's request cache (sqlite of model responses) is kept
per model by the caller; its timestamped outputs are never written: results go to fixed paths.

A sampled task (lm_tasks.task_config with sampling) scores each of a document's n samples on its own
(one lm-eval filter per sample): a document's row keeps every sample's output and metric values
(`outputs`, `per_sample`) and its metric value is their mean, so a result's metric is pass@1 (the
mean over documents of each document's share of correct samples) and intervals can resample documents.
"""
from __future__ import annotations

import json
import os
import random
import tempfile
from contextlib import contextmanager

from loopkv.errors import LoopKVError


def select_docs(total: int, max_docs: int | None, seed: int, max_docs_per_group: int | None = None,
                groups: list | None = None) -> list[int]:
    """The documents evaluated, in document order: all, a seeded sample of `max_docs`, or, with
    `max_docs_per_group`, a seeded sample of that many from each group (`groups[i]`: document i's
    group, e.g. BBH's subtask; all of a smaller group). The same (seed, documents) give the same
    selection in every shard; a group's sample is seeded by (seed, group) alone."""
    if max_docs_per_group is not None:
        if max_docs is not None:
            raise LoopKVError("max_docs and max_docs_per_group cannot both be set")
        if groups is None or len(groups) != total:
            raise LoopKVError(f"max_docs_per_group needs the group of each of the {total} documents")
        return sorted(i for group, members in doc_groups(groups).items()
                      for i in _group_sample(group, members, max_docs_per_group, seed))
    if max_docs is None or max_docs >= total:
        return list(range(total))
    return sorted(random.Random(seed).sample(range(total), max_docs))


def doc_groups(groups: list) -> dict:
    """{group: its documents' indices, in document order}, groups in order of first appearance."""
    members: dict = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return members


def _group_sample(group, members: list[int], n: int, seed: int) -> list[int]:
    if n >= len(members):
        return list(members)
    return random.Random(f"loopkv-docs:{seed}:{json.dumps(group, sort_keys=True)}").sample(members, n)


def group_selection(selection: list[int], groups: list) -> dict:
    """{group: [documents selected, documents]}: what a per-group selection took from each group."""
    chosen = set(selection)
    return {g: [sum(i in chosen for i in members), len(members)] for g, members in doc_groups(groups).items()}


def shard_docs(selection: list[int], shard: int, shards: int) -> list[int]:
    if not 0 <= shard < shards:
        raise LoopKVError(f"shard {shard} is not in 0..{shards - 1}")
    return selection[shard::shards]


def stay_offline() -> None:
    """Keep lm-eval's libraries off any hub (they read these settings when first used)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@contextmanager
def _no_environment_report():
    """lm-eval ends each evaluation with a report of the machine (torch's collect_env: compiler, pip and
    GPU queries in subprocesses, 1-2 s per shard job, measured) that no loopkv result reads: a job's
    provenance records its environment. It is left out of the results for the duration."""
    import lm_eval.evaluator as evaluator

    report = evaluator.add_env_info
    evaluator.add_env_info = lambda results: None
    try:
        yield
    finally:
        evaluator.add_env_info = report


def run_task(lm, task_cfg: dict, doc_ids: list[int], cache_db: str | None = None, seed: int = 0) -> dict:
    """Evaluate `lm` (an lm-eval LM) on documents `doc_ids` of one task config (lm_tasks.task_config).
    Returns {"task", "doc_ids", "samples": [per-document metrics and output], "metrics": {metric: mean}}."""
    stay_offline()
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    name = task_cfg["task"]
    metric_names = [m["metric"] for m in task_cfg["metric_list"]]
    with tempfile.TemporaryDirectory(prefix="loopkv-hfds-") as hf_cache:
        # a private datasets cache: concurrent jobs never share (or trust) each other's Arrow files
        previous = os.environ.get("HF_DATASETS_CACHE")
        os.environ["HF_DATASETS_CACHE"] = hf_cache
        try:
            with _no_environment_report():
                out = simple_evaluate(model=lm, tasks=[task_cfg], task_manager=TaskManager(include_defaults=False),
                                      samples={name: list(doc_ids)}, log_samples=True, bootstrap_iters=0,
                                      use_cache=cache_db, random_seed=seed, numpy_random_seed=seed,
                                      torch_random_seed=seed, fewshot_random_seed=seed)
        finally:
            if previous is None:
                os.environ.pop("HF_DATASETS_CACHE", None)
            else:
                os.environ["HF_DATASETS_CACHE"] = previous
    from loopkv.eval.lm_tasks import decoding, sample_filter

    how = decoding(task_cfg)
    if how["strategy"] == "sampling":
        samples, metrics = _sampled_rows(out, name, metric_names, how["samples"])
    else:
        samples = []
        for s in sorted(out["samples"][name], key=lambda s: s["doc_id"]):
            row = {"doc_id": int(s["doc_id"]), "id": s["doc"].get("id"), **{m: float(s[m]) for m in metric_names}}
            if task_cfg["output_type"] == "generate_until":
                row["output"] = s["filtered_resps"][0]
            samples.append(row)
        reported = out["results"][name]
        metrics = {m: float(reported[f"{m},none"]) for m in metric_names}
    if [s["doc_id"] for s in samples] != sorted(doc_ids):
        raise LoopKVError(f"{name}: lm-eval returned documents {[s['doc_id'] for s in samples][:8]}..., "
                          f"expected {sorted(doc_ids)[:8]}...")
    if how["strategy"] == "sampling":
        # lm-eval's own mean per sample (filter), averaged: the same number up to round-off
        reported = out["results"][name]
        for m in metric_names:
            theirs = sum(reported[f"{m},{sample_filter(k)}"] for k in range(how["samples"])) / how["samples"]
            if abs(theirs - metrics[m]) > 1e-9:
                raise LoopKVError(f"{name}: {m} is {metrics[m]} over documents, lm-eval's samples average {theirs}")
    return {"task": name, "doc_ids": sorted(doc_ids), "samples": samples, "metrics": metrics, "n": len(samples),
            "decoding": how, "samples_per_doc": how.get("samples", 1)}


def _sampled_rows(out: dict, name: str, metric_names: list[str], n: int) -> tuple[list[dict], dict]:
    """Per-document rows of a sampled task from lm-eval's logged samples (one per document and sample
    filter): each metric's per-sample values, their mean, and the outputs; the metrics' means."""
    from loopkv.eval.lm_tasks import sample_filter

    by_doc: dict[int, dict[str, dict]] = {}
    for s in out["samples"][name]:
        by_doc.setdefault(int(s["doc_id"]), {})[s["filter"]] = s
    samples = []
    for doc_id in sorted(by_doc):
        logged = by_doc[doc_id]
        filters = [sample_filter(k) for k in range(n)]
        if sorted(logged) != sorted(filters):
            raise LoopKVError(f"{name}: document {doc_id} has samples {sorted(logged)}, expected {filters}")
        per_sample = {m: [float(logged[f][m]) for f in filters] for m in metric_names}
        first = logged[filters[0]]
        samples.append({"doc_id": doc_id, "id": first["doc"].get("id"),
                        **{m: sum(v) / n for m, v in per_sample.items()},
                        "per_sample": per_sample, "outputs": [logged[f]["filtered_resps"][0] for f in filters]})
    metrics = {m: sum(r[m] for r in samples) / len(samples) for m in metric_names} if samples else {}
    return samples, metrics


def merge_shards(shards: list[dict]) -> dict:
    """The result of the whole selection from its shards (each document exactly once). Shards must
    agree on the decoding (greedy, or the same sampling settings and samples per document)."""
    if not shards:
        raise LoopKVError("nothing to merge")
    tasks = {s["task"] for s in shards}
    if len(tasks) != 1:
        raise LoopKVError(f"shards of different tasks: {sorted(tasks)}")
    expected = shards[0]["selection"]
    counts = {s["shards"] for s in shards}
    if counts != {len(shards)} or sorted(s["shard"] for s in shards) != list(range(len(shards))):
        raise LoopKVError(f"expected shards 0..{len(shards) - 1} of one split, got "
                          f"{sorted((s['shard'], s['shards']) for s in shards)}")
    # a shard written before sampled decoding existed decoded greedily (or scored log-likelihoods)
    decodings = {json.dumps(s.get("decoding"), sort_keys=True) for s in shards}
    if len(decodings) != 1:
        raise LoopKVError(f"{tasks.pop()}: shards disagree on the decoding: {sorted(decodings)}")
    decoding = shards[0].get("decoding")
    samples = sorted((row for s in shards for row in s["samples"]), key=lambda r: r["doc_id"])
    got = [r["doc_id"] for r in samples]
    if got != expected:
        raise LoopKVError(f"{tasks.pop()}: the shards cover {len(got)} documents, the selection has "
                          f"{len(expected)} (missing or duplicated documents)")
    per_doc = (decoding or {}).get("samples", 1)
    wrong = [r["doc_id"] for r in samples if len(r.get("outputs", [None])) != per_doc]
    if wrong:
        raise LoopKVError(f"{tasks.pop()}: documents {wrong[:8]} do not hold {per_doc} samples each")
    # the formula of lm-eval's `mean` aggregation, over documents in order: bit-equal to an unsharded run
    metrics = {m: sum(r[m] for r in samples) / len(samples) for m in shards[0]["metrics"]}
    merged = {"task": shards[0]["task"], "doc_ids": got, "samples": samples, "metrics": metrics, "n": len(samples)}
    if decoding is not None:
        merged.update(decoding=decoding, samples_per_doc=per_doc)
    return merged
