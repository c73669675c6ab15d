"""`loopkv data-corpus`, `data-tokenizer`, `data-task`: each builds its whole output directory atomically,
with a manifest.json holding the stats and the provenance block."""
from __future__ import annotations

import json
from pathlib import Path

from loopkv.cli_args import json_arg
from loopkv.utils.atomic import atomic_path, write_json
from loopkv.utils.provenance import Provenance


def register(subparsers) -> None:

    p = subparsers.add_parser("data-corpus", help="clean the source texts and split them into train/val/test")
    p.add_argument("--cfg", type=json_arg, required=True, help="the data.corpus config section as JSON")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.set_defaults(func=run_corpus)

    p = subparsers.add_parser("data-tokenizer", help="train (or copy) the tokenizer")
    p.add_argument("--cfg", type=json_arg, required=True, help="the data.tokenizer config section as JSON")
    p.add_argument("--train", type=Path, required=True, help="the corpus train split (train.txt)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.set_defaults(func=run_tokenizer)

    p = subparsers.add_parser("data-task", help="generate a synthetic task's train/test examples")
    p.add_argument("name", help="task name: passkey, arithmetic or cloze")
    p.add_argument("--cfg", type=json_arg, required=True, help="the data.tasks.<name> config section as JSON")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--corpus", type=Path, help="corpus directory (passkey, cloze)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer directory (passkey)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.set_defaults(func=run_task)

    p = subparsers.add_parser("data-passkey-grid", help="the passkey grid: trials per (length, depth) cell")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"passkey": data.tasks.passkey, "passkey_grid": ...}')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--corpus", type=Path, required=True, help="corpus directory (corpus filler)")
    p.add_argument("--tokenizer", type=Path, required=True, help="tokenizer directory (lengths are in its tokens)")
    p.add_argument("--out", type=Path, required=True, help="output directory (test.jsonl, manifest.json)")
    p.set_defaults(func=run_passkey_grid)

    p = subparsers.add_parser("fetch-bigbench", help="download PyPI's bigbench==1.0.0 sdist (BBH's source tasks), sha256-checked")
    p.add_argument("--dest", type=Path, help="where to put it (default: inside this environment, where BBH looks)")
    p.set_defaults(func=run_fetch_bigbench)

    p = subparsers.add_parser("data-bench", help="a real benchmark from offline package files, normalised to JSONL")
    p.add_argument("name", help="benchmark name (see loopkv.data.benchmarks.BENCHMARKS)")
    p.add_argument("--out", type=Path, required=True, help="output directory (test.jsonl, manifest.json)")
    p.set_defaults(func=run_bench)


def run_corpus(args) -> int:
    from loopkv.data.corpus import build_corpus
    from loopkv.data.sources import resolve_sources

    inputs = {source.name: source.path for source in resolve_sources(args.cfg)}
    provenance = Provenance(args.cfg, args.seed, inputs)
    return _build(args.out, provenance, lambda out: build_corpus(args.cfg, args.seed, out))


def run_tokenizer(args) -> int:
    from loopkv.data.tokenizer import train_tokenizer

    inputs = {"train": args.train}
    if isinstance(args.cfg, dict) and args.cfg.get("kind") == "pretrained" and args.cfg.get("path"):
        if Path(args.cfg["path"]).is_dir():   # a bad path is reported by train_tokenizer, naming the key
            inputs["pretrained"] = Path(args.cfg["path"])
    provenance = Provenance(args.cfg, None, inputs)
    return _build(args.out, provenance, lambda out: train_tokenizer(args.cfg, args.train, out))


def run_task(args) -> int:
    from loopkv.data.tasks import build_task, get_task

    get_task(args.name)   # fail on a bad name before anything is hashed or written
    inputs = {name: path for name, path in (("corpus", args.corpus), ("tokenizer", args.tokenizer)) if path}
    provenance = Provenance(args.cfg, args.seed, inputs)
    return _build(args.out, provenance,
                  lambda out: build_task(args.name, args.cfg, args.seed, args.corpus, args.tokenizer, out))


def run_passkey_grid(args) -> int:
    from loopkv.data.tasks.common import TaskInputs
    from loopkv.data.tasks.passkey import make_grid
    from loopkv.utils.atomic import write_jsonl
    from loopkv.utils.seeding import derive_seed

    grid = args.cfg["passkey_grid"]
    provenance = Provenance(args.cfg, args.seed, {"corpus": args.corpus, "tokenizer": args.tokenizer})

    def build(out: Path) -> dict:
        rows = make_grid(args.cfg["passkey"], grid["lengths"], grid["depths"], grid["trials"],
                         derive_seed(args.seed, "passkey-grid"), TaskInputs(args.corpus, args.tokenizer))
        write_jsonl(out / "test.jsonl", rows)
        return {"examples": len(rows), "lengths": grid["lengths"], "depths": grid["depths"], "trials": grid["trials"],
                "max_tokens": max(r["meta"]["n_tokens"] for r in rows)}

    return _build(args.out, provenance, build)


def run_fetch_bigbench(args) -> int:
    from loopkv.data.bigbench import fetch_sdist

    print(fetch_sdist(args.dest))
    return 0


def run_bench(args) -> int:
    from loopkv.data.benchmarks import get_benchmark
    from loopkv.utils.atomic import write_jsonl

    bench = get_benchmark(args.name)

    def build(out: Path) -> dict:
        rows, sources = bench.read()
        write_jsonl(out / "test.jsonl", rows)
        # the source files (package, version, sha256) are this result's inputs: a reviewer re-hashes them
        return {"benchmark": bench.name, "kind": bench.kind, "examples": len(rows), "sources": sources}

    return _build(args.out, Provenance({"benchmark": bench.name}, None, {}), build)


def _build(out_dir: Path, provenance: Provenance, build) -> int:
    """Run build(tmp_dir), add the manifest, and only then put the directory in place."""
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        stats = build(tmp)
        write_json(tmp / "manifest.json", {"stats": stats, "provenance": provenance.block()})
    print(json.dumps({"out": str(out_dir), "stats": _brief(stats)}, sort_keys=True))
    return 0


def _brief(stats: dict) -> dict:
    # the console line leaves out per-file detail; manifest.json has everything
    return {k: v for k, v in stats.items() if k != "sources"}
