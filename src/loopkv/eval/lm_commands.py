"""Subcommands: lm-eval (lm-eval's own CLI with the "loopkv" model and the loopkv tasks), lm-eval-shard
(one task shard of one model, fixed output path), lm-eval-merge (shards -> the task's result)."""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from loopkv.cli_args import add_device_arg, json_arg, named_path
from loopkv.utils.atomic import write_json
from loopkv.utils.provenance import Provenance


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

    p = sub.add_parser("lm-eval-shard", help="one shard of one loopkv task for one (method, budget), through lm-eval")
    p.add_argument("--cfg", type=json_arg, required=True,
                   help='{"lm_eval": {batch_size, tasks.<data>}, "methods", "model"} slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--task", required=True, help="a loopkv task name, e.g. loopkv_gsm8k")
    p.add_argument("--data", required=True, help="the task's data directory (test.jsonl)")
    p.add_argument("--method", required=True)
    p.add_argument("--budget", required=True)
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--codec", help="distilled codec (.pt) for codec methods")
    p.add_argument("--student", help="MELT model directory for method melt")
    p.add_argument("--shard", type=int, required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--cache-dir", help="lm-eval request cache folder of this model (kept between runs)")
    p.add_argument("--out", required=True, help="shard result JSON")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (not part of the result)")
    add_device_arg(p)
    p.set_defaults(func=_lm_eval_shard)

    p = sub.add_parser("lm-eval-merge", help="the shards of one task into its result (equal to an unsharded run)")
    p.add_argument("shards", nargs="+", help="shard result JSONs")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_lm_eval_merge)


def _lm_eval_cli(args) -> int:
    import sys
    import tempfile

    import loopkv.eval.lm_model  # noqa: F401  (registers the "loopkv" model)
    from loopkv.eval.lm_runner import _offline
    from loopkv.eval.lm_tasks import task_config, write_task_yamls

    _offline()
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


def _lm_eval_shard(args) -> None:
    import torch

    from loopkv.eval.lm_model import LoopKVLM
    from loopkv.eval.lm_runner import run_task, select_docs, shard_docs
    from loopkv.eval.lm_tasks import get_lm_task, task_config
    from loopkv.eval.method_model import load_method_model
    from loopkv.utils.atomic import read_jsonl
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed

    torch.set_num_threads(args.threads)
    task = get_lm_task(args.task)
    settings = args.cfg["lm_eval"]["tasks"][task.data]
    inputs = {"teacher": args.teacher, "data": args.data}
    for name in ("codec", "student"):
        if getattr(args, name):
            inputs[name] = getattr(args, name)
    prov = Provenance({**args.cfg, "task": args.task, "method": args.method, "budget": args.budget,
                       "shard": args.shard, "shards": args.shards}, args.seed, inputs)
    served = load_method_model(args.teacher, args.method, args.budget, args.cfg["methods"],
                               args.cfg["model"]["dtype"], codec_path=args.codec, student_dir=args.student,
                               device=resolve_device(args.device))
    lm = LoopKVLM(served=served, batch_size=args.cfg["lm_eval"]["batch_size"])
    cfg = task_config(args.task, args.data, settings.get("max_gen_toks"), served.tokenizer)
    total = len(read_jsonl(Path(args.data, "test.jsonl"), "task data"))
    selection = select_docs(total, settings.get("max_docs"), derive_seed(args.seed, "lm-eval", task.data))
    docs = shard_docs(selection, args.shard, args.shards)
    cache_db = None
    if args.cache_dir:
        # one sqlite file per (model weights, task, shard): concurrent shards never share a writer
        block = prov.block()
        served_as = {"method": args.method, "budget": args.budget, "setting": served.setting,
                     "methods": args.cfg["methods"], "model": args.cfg["model"]}
        folder = Path(args.cache_dir) / model_fingerprint(block["inputs"], served_as)
        folder.mkdir(parents=True, exist_ok=True)
        cache_db = str(folder / f"{args.task}-{args.shard}of{args.shards}")
    result = run_task(lm, cfg, docs, cache_db=cache_db, seed=derive_seed(args.seed, "lm-eval-run", task.data))
    result.update({"shard": args.shard, "shards": args.shards, "selection": selection, "total_docs": total,
                   "method": args.method, "budget": args.budget, "setting": served.setting,
                   "headline": task.metric, "provenance": prov.block()})
    write_json(args.out, result)


# what lm-eval-shard writes and lm-eval-merge reads
SHARD_FIELDS = {"task": str, "selection": list, "samples": list, "metrics": dict, "shard": int, "shards": int,
                "total_docs": int, "method": str, "budget": str, "setting": dict, "headline": str,
                "provenance": dict}


def _lm_eval_merge(args) -> None:
    from loopkv.errors import LoopKVError
    from loopkv.eval.lm_runner import merge_shards

    from loopkv.utils.checked_io import read_json

    shards = [read_json(p, "lm-eval shard", SHARD_FIELDS) for p in args.shards]
    merged = merge_shards(shards)
    for key in ("method", "budget", "setting", "headline", "total_docs"):
        values = {json.dumps(s[key], sort_keys=True) for s in shards}
        if len(values) != 1:
            raise LoopKVError(f"shards disagree on {key}: {sorted(values)}")
        merged[key] = shards[0][key]
    merged["provenance"] = {"merged_from": {p: s["provenance"] for p, s in zip(args.shards, shards)}}
    write_json(args.out, merged)
