"""Subcommands: lm-eval (lm-eval's own CLI with the "loopkv" model and the loopkv tasks), lm-eval-shard
(one task shard of one model, fixed output path), lm-eval-merge (shards -> the task's result)."""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from loopkv.cli_args import named_path
from loopkv.jobs import Arg, JobSpec, MethodKeys, View
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import write_json

LM_EVAL_SHARD = JobSpec(
    "lm-eval-shard", "one shard of one loopkv task for one (method, budget), through lm-eval",
    # the one task's settings (views.lm_eval_task): its shard count is in the output's name
    reads=("seed", "lm_eval.batch_size", View("lm_eval.tasks", "loopkv.jobs.views:lm_eval_task", depends=("lm_eval.tasks",)),
           "model.dtype", MethodKeys(served=True)),
    wildcards=(Arg("task", "a loopkv task: loopkv_ and its id, e.g. loopkv_gsm8k, loopkv_math500-sampled "
                           "(an lm_eval.tasks entry's name, and its variant after a hyphen)", kind="value"),
               Arg("method", "a registered KV method", kind="value"), Arg("budget", "its budget label", kind="value"),
               Arg("shard", "this shard's index", kind="int"), Arg("shards", "the task's shard count", kind="int")),
    inputs=(Arg("teacher", "teacher model directory"), Arg("data", "the task's data directory (test.jsonl)"),
            Arg("codec", "distilled codec (.pt) for codec methods", required=False),
            Arg("student", "MELT model directory for method melt", required=False)),
    outputs=(Arg("out", "shard result JSON"),),
    extra=(Arg("cache-dir", "lm-eval request cache folder of this model (kept between runs)", required=False),),
    threads="lm_eval.threads", device=True, size="eval")

LM_EVAL_MERGE = JobSpec(
    "lm-eval-merge", "the shards of one task into its result (equal to an unsharded run)",
    inputs=(Arg("shards", "shard result JSONs", kind="paths", positional=True),),
    outputs=(Arg("out", "the task's result JSON"),))


def register(sub) -> None:
    p = sub.add_parser("lm-eval", help="lm-eval's command line with model 'loopkv' registered and the loopkv tasks",
                       description="Everything after the options below goes to lm-eval's CLI unchanged, e.g. "
                                   "loopkv lm-eval --task-data loopkv_gsm8k=results/data/bench/gsm8k -- --model loopkv "
                                   "--model_args teacher=results/teacher/model --tasks loopkv_gsm8k --limit 8")
    p.add_argument("--task-data", type=named_path, action="append", default=[],
                   help="TASK=DIR: make loopkv task TASK (e.g. loopkv_gsm8k) read DIR/test.jsonl")
    p.add_argument("--tokenizer", help="tokenizer directory (loopkv_passkey sizes its generation budget with it)")
    p.add_argument("--max-gen-toks", type=int, help="generation budget for the generative loopkv tasks")
    p.add_argument("lm_eval_args", nargs=argparse.REMAINDER, help="lm-eval's own arguments (after --)")
    p.set_defaults(func=_lm_eval_cli)

    add_command(sub, LM_EVAL_SHARD, _lm_eval_shard)

    add_command(sub, LM_EVAL_MERGE, _lm_eval_merge)


def _lm_eval_cli(args) -> int:
    import sys
    import tempfile

    import loopkv.eval.lm_model  # noqa: F401  (registers the "loopkv" model)
    from loopkv.eval.lm_runner import stay_offline
    from loopkv.eval.lm_tasks import task_config, write_task_yamls

    stay_offline()
    rest = list(args.lm_eval_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    tokenizer = None
    if args.tokenizer:
        from loopkv.data.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer)
    from lm_eval.__main__ import cli_evaluate

    with tempfile.TemporaryDirectory(prefix="loopkv-tasks-") as folder:
        if args.task_data:
            configs = [task_config(name, data, args.max_gen_toks, tokenizer, resolve=False)
                       for name, data in args.task_data]
            rest += ["--include_path", str(write_task_yamls(folder, configs))]
        sys.argv = ["lm-eval", *rest]
        cli_evaluate()
    return 0


def model_fingerprint(prov_inputs: dict, served: dict, names=("teacher", "codec", "student")) -> str:
    """A short hash of what decides a served model's answers: its files' hashes and how it is read
    (`served`: method, budget, its setting, the methods and model keys of its slice). The request
    cache is only reused for the same model read the same way: methods without weights of their own
    (the teacher, final_loop, cla, kv_quant at any budget) share the teacher's files."""
    digest = hashlib.sha256(json.dumps({"files": {k: prov_inputs[k]["sha256"] for k in names if k in prov_inputs},
                                        "served": served}, sort_keys=True).encode())
    return digest.hexdigest()[:12]


def _lm_eval_shard(job) -> None:
    import tempfile

    from loopkv.errors import LoopKVError
    from loopkv.eval.lm_model import LoopKVLM
    from loopkv.eval.lm_runner import group_selection, run_task, select_docs, shard_docs
    from loopkv.eval.lm_tasks import PREFIX, get_lm_task, split_task_id, task_config, task_name
    from loopkv.eval.method_model import load_method_model
    from loopkv.utils.atomic import read_jsonl
    from loopkv.utils.seeding import derive_seed

    args, prov = job.args, job.prov
    tid = args.task.removeprefix(PREFIX)          # the entry's id: its name, or name-variant
    data, variant = split_task_id(tid)
    task = get_lm_task(task_name(data))
    settings = job.cfg["lm_eval"]["tasks"][tid]
    sampling = settings.get("sampling")
    if sampling is not None:
        # every method and shard draws the same random numbers for a document (the seed is the entry's)
        seed = sampling.get("seed")
        sampling = {**sampling, "seed": derive_seed(job.seed, "lm-eval-sampling", data) if seed is None else seed}
    # the selection first (no model needed): every shard computes the same one and takes its share
    rows = read_jsonl(Path(args.data, "test.jsonl"), "task data")
    total, per_group, groups = len(rows), settings.get("max_docs_per_group"), None
    if per_group is not None:
        if task.shot_group is None:
            raise LoopKVError(f"task {data!r}: its documents have no groups, so max_docs_per_group cannot apply")
        missing = next((i for i, r in enumerate(rows) if r.get(task.shot_group) is None), None)
        if missing is not None:
            raise LoopKVError(f"task {data!r}: document {missing} has no {task.shot_group!r}, which "
                              f"max_docs_per_group samples by (rebuild its data with `loopkv data-bench`)")
        groups = [r[task.shot_group] for r in rows]
    selection = select_docs(total, settings.get("max_docs"), derive_seed(job.seed, "lm-eval", task.data),
                            max_docs_per_group=per_group, groups=groups)
    if len(selection) < args.shards:
        # lm-eval reads an empty document list as "every document": a shard must hold one
        raise LoopKVError(f"task {tid!r}: {args.shards} shards, but {len(selection)} documents are selected "
                          f"(lm_eval.tasks entry {tid}: lower its shards to at most {len(selection)})")
    docs = shard_docs(selection, args.shard, args.shards)
    served = load_method_model(args.teacher, args.method, args.budget, job.cfg["methods"],
                               job.cfg["model"]["dtype"], codec_path=args.codec, student_dir=args.student,
                               device=job.device, with_teacher=False)   # a MELT student generates alone
    lm = LoopKVLM(served=served, batch_size=job.cfg["lm_eval"]["batch_size"])
    shots_dir = tempfile.TemporaryDirectory(prefix="loopkv-shots-")   # the few-shot data file, if any
    cfg = task_config(task_name(data), args.data, settings.get("max_gen_toks"), served.tokenizer,
                      shots=settings.get("shots") or 0, shot_seed=derive_seed(job.seed, "lm-eval-shots", task.data),
                      work_dir=shots_dir.name, sampling=sampling)
    cache_db = None
    if args.cache_dir:
        # one sqlite file per (model weights, task, shard): concurrent shards never share a writer
        block = prov.block()
        served_as = {"method": args.method, "budget": args.budget, "setting": served.setting,
                     "methods": job.cfg["methods"], "model": job.cfg["model"]}
        folder = Path(args.cache_dir) / model_fingerprint(block["inputs"], served_as)
        folder.mkdir(parents=True, exist_ok=True)
        cache_db = str(folder / f"{args.task}-{args.shard}of{args.shards}")
    with shots_dir:
        result = run_task(lm, cfg, docs, cache_db=cache_db, seed=derive_seed(job.seed, "lm-eval-run", task.data))
    result.update({"task_id": tid, "variant": variant, "shots": settings.get("shots") or 0, "shard": args.shard, "shards": args.shards, "selection": selection, "total_docs": total,
                   "method": args.method, "budget": args.budget, "setting": served.setting,
                   "codec_training": served.codec_training, "headline": task.metric, "provenance": prov.block()})
    if per_group is not None:   # what each group gave: {group: [selected, documents]}
        result["per_group"] = {"field": task.shot_group, "max_docs_per_group": per_group,
                               "groups": group_selection(selection, groups)}
    write_json(args.out, result)


# what lm-eval-shard writes and lm-eval-merge reads
SHARD_FIELDS = {"task": str, "selection": list, "samples": list, "metrics": dict, "shard": int, "shards": int,
                "total_docs": int, "method": str, "budget": str, "setting": dict, "headline": str,
                "provenance": dict}


def _lm_eval_merge(job) -> None:
    from loopkv.errors import LoopKVError
    from loopkv.eval.lm_runner import merge_shards

    args = job.args
    from loopkv.utils.checked_io import read_json

    shards = [read_json(p, "lm-eval shard", SHARD_FIELDS) for p in args.shards]
    merged = merge_shards(shards)
    for s in shards:
        s.setdefault("shots", 0)   # a shard written before few-shot prompts existed was zero-shot
        s.setdefault("variant", None)   # ... and before variants, the benchmark's one way of running
        # ... and before on-policy codecs were served, a codec was the off-policy one
        s.setdefault("codec_training", "off_policy" if "codec" in s["provenance"].get("inputs", {}) else None)
    for key in ("method", "budget", "setting", "headline", "total_docs", "shots", "variant", "codec_training"):
        values = {json.dumps(s[key], sort_keys=True) for s in shards}
        if len(values) != 1:
            raise LoopKVError(f"shards disagree on {key}: {sorted(values)}")
        merged[key] = shards[0][key]
    per_group = {json.dumps(s.get("per_group"), sort_keys=True) for s in shards}   # a per-group selection's record
    if len(per_group) != 1:
        raise LoopKVError(f"shards disagree on per_group: {sorted(per_group)}")
    if shards[0].get("per_group") is not None:
        merged["per_group"] = shards[0]["per_group"]
    merged["task_id"] = shards[0].get("task_id", merged["task"].removeprefix("loopkv_"))
    merged["provenance"] = {"merged_from": {p: s["provenance"] for p, s in zip(args.shards, shards)}}
    write_json(args.out, merged)
