"""Subcommands: teacher-eval."""
from __future__ import annotations

from loopkv.cli_args import json_arg, named_path
from loopkv.utils.atomic import write_json
from loopkv.utils.provenance import Provenance


def register(sub) -> None:
    p = sub.add_parser("teacher-eval", help="quality of the teacher with its full cache")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"teacher_eval": ..., "model": ...} slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--corpus", required=True, help="corpus directory (test.txt)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with test.jsonl")
    p.add_argument("--out", required=True, help="metrics JSON")
    p.add_argument("--samples", help="per-sample JSON (generations, correctness)")
    p.set_defaults(func=_teacher_eval)


def _teacher_eval(args) -> None:
    import torch

    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.eval.quality import evaluate_quality
    from loopkv.models.loading import load_teacher
    from loopkv.utils.seeding import derive_seed, seed_everything

    cfg = args.cfg["teacher_eval"]
    torch.set_num_threads(cfg.get("threads", torch.get_num_threads()))
    seed_everything(derive_seed(args.seed, "teacher-eval"))
    task_dirs = dict(args.task)
    prov = Provenance(args.cfg, args.seed, {"teacher": args.teacher, "corpus": args.corpus,
                                            **{f"task:{k}": v for k, v in task_dirs.items()}})
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"])
    tokenizer = load_tokenizer(args.teacher)
    metrics, samples = evaluate_quality(model, tokenizer, args.corpus, task_dirs, cfg, cfg["seq_len"])
    metrics["kv_method"] = "full"
    metrics["cache_dtype"] = args.cfg["model"]["dtype"]
    if args.samples:
        write_json(args.samples, {"samples": samples, "provenance": prov.block()})
    write_json(args.out, {"metrics": metrics, "provenance": prov.block()})
