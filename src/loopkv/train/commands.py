"""Subcommands: teacher-pretrain."""
from __future__ import annotations

from pathlib import Path

from loopkv.cli_args import json_arg, named_path
from loopkv.utils.atomic import atomic_path, write_json
from loopkv.utils.provenance import Provenance


def register(sub) -> None:
    p = sub.add_parser("teacher-pretrain", help="pretrain the tiny looped teacher (resumable)")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"teacher": ..., "model": ...} config slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--corpus", required=True, help="corpus directory (train.txt, val.txt)")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with train.jsonl")
    p.add_argument("--out", required=True, help="model directory to write (save_pretrained)")
    p.add_argument("--checkpoints", required=True, help="directory for resumable checkpoints")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_pretrain)


def _pretrain(args) -> None:
    from loopkv.train.pretrain import pretrain

    task_dirs = dict(args.task)
    prov = Provenance(args.cfg, args.seed, {"corpus": args.corpus, "tokenizer": args.tokenizer,
                                            **{f"task:{k}": v for k, v in task_dirs.items()}})
    # checkpoints are keyed by config + inputs: a rerun after an edit never resumes foreign state
    checkpoints = Path(args.checkpoints) / prov.key()
    checkpoints.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out) as tmp:
        curve = pretrain(args.cfg["teacher"], args.cfg["model"]["arch"], args.cfg["model"]["dtype"],
                         args.seed, args.corpus, args.tokenizer, task_dirs, tmp, checkpoints,
                         progress=not args.no_progress)
        write_json(tmp / "train_curve.json", {"curve": curve, "provenance": prov.block()})
