"""`loopkv data-corpus`, `data-tokenizer`, `data-task`: each builds its whole output directory atomically,
with a manifest.json holding the stats and the provenance block."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.jobs import Arg, JobSpec
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import atomic_path, write_json
from loopkv.utils.provenance import Provenance


_OUT = Arg("out", "output directory")
_CORPUS_DIR = Arg("corpus", "corpus directory")
_TOKENIZER_DIR = Arg("tokenizer", "tokenizer directory")

DATA_CORPUS = JobSpec(
    "data-corpus", "clean the source texts and split them into train/val/test",
    reads=("seed", "data.corpus"), outputs=(_OUT,), size="data")

DATA_TOKENIZER = JobSpec(
    "data-tokenizer", "train (or copy) the tokenizer",
    reads=("data.tokenizer",), inputs=(Arg("train", "the corpus train split (train.txt)"),), outputs=(_OUT,),
    size="data")

DATA_TASK = JobSpec(
    "data-task", "generate a synthetic task's train/test examples",
    reads=("seed", "data.tasks.{task}"),
    wildcards=(Arg("task", "task name: passkey, arithmetic or cloze", kind="value", positional=True),),
    inputs=(Arg("corpus", "corpus directory (passkey, cloze)", required=False),
            Arg("tokenizer", "tokenizer directory (passkey)", required=False)),
    outputs=(_OUT,), size="data")

DATA_PASSKEY_GRID = JobSpec(
    "data-passkey-grid", "the passkey grid: trials per (length, depth) cell",
    reads=("seed", "data.tasks.passkey", "passkey_grid.lengths", "passkey_grid.depths", "passkey_grid.trials"),
    inputs=(Arg("corpus", "corpus directory (corpus filler)"),
            Arg("tokenizer", "tokenizer directory (lengths are in its tokens)")),
    outputs=(Arg("out", "output directory (test.jsonl, manifest.json)"),), size="data")

DATA_BENCH = JobSpec(
    "data-bench", "a real benchmark from offline package files (or the user's file), normalised to JSONL",
    wildcards=(Arg("bench", "benchmark name (see loopkv.data.benchmarks.BENCHMARKS)", kind="value", positional=True),),
    # the file the benchmark's config key names (data.local_benchmarks.<bench>, data.bigbench_sdist): an
    # input, so its sha256 is in the provenance and an edit of it reruns the job
    inputs=(Arg("source", "the file the benchmark's config key names (a user-file benchmark's, or "
                          "BIG-bench's sdist for bbh / bbh_gen)", required=False),),
    outputs=(Arg("out", "output directory (test.jsonl, manifest.json)"),), size="data")


def register(subparsers) -> None:
    add_command(subparsers, DATA_CORPUS, run_corpus)
    add_command(subparsers, DATA_TOKENIZER, run_tokenizer)
    add_command(subparsers, DATA_TASK, run_task)
    add_command(subparsers, DATA_PASSKEY_GRID, run_passkey_grid)
    add_command(subparsers, DATA_BENCH, run_bench)

    p = subparsers.add_parser("fetch-bigbench", help="download PyPI's bigbench==1.0.0 sdist (BBH's source tasks), sha256-checked")
    p.add_argument("--dest", type=Path, help="where to put it (default: inside this environment, where BBH looks)")
    p.add_argument("--if-served", action="store_true",
                   help="a download that fails is a warning, not an error (make setup: PyPI no longer serves "
                        "the file, and only BBH's tasks need it)")
    p.set_defaults(func=run_fetch_bigbench)



def run_corpus(job) -> int:
    from loopkv.data.corpus import build_corpus
    from loopkv.data.sources import resolve_sources

    cfg = job.cfg["data"]["corpus"]
    job.prov.add_inputs({source.name: source.path for source in resolve_sources(cfg)})
    return _build(Path(job.args.out), job.prov, lambda out: build_corpus(cfg, job.seed, out))


def run_tokenizer(job) -> int:
    from loopkv.data.tokenizer import train_tokenizer

    cfg, train = job.cfg["data"]["tokenizer"], Path(job.args.train)
    if cfg["kind"] == "pretrained" and cfg["path"] and Path(cfg["path"]).is_dir():
        job.prov.add_inputs({"pretrained": cfg["path"]})   # a bad path is reported by train_tokenizer, naming the key
    return _build(Path(job.args.out), job.prov, lambda out: train_tokenizer(cfg, train, out))


def run_task(job) -> int:
    from loopkv.data.tasks import build_task, get_task

    args = job.args
    get_task(args.task)   # fail on a bad name before anything is written
    corpus, tokenizer = (Path(p) if p else None for p in (args.corpus, args.tokenizer))
    cfg = job.cfg["data"]["tasks"][args.task]
    return _build(Path(args.out), job.prov, lambda out: build_task(args.task, cfg, job.seed, corpus, tokenizer, out))


def run_passkey_grid(job) -> int:
    from loopkv.data.tasks.common import TaskInputs
    from loopkv.data.tasks.passkey import make_grid
    from loopkv.utils.atomic import write_jsonl
    from loopkv.utils.seeding import derive_seed

    args, grid = job.args, job.cfg["passkey_grid"]

    def build(out: Path) -> dict:
        rows = make_grid(job.cfg["data"]["tasks"]["passkey"], grid["lengths"], grid["depths"], grid["trials"],
                         derive_seed(job.seed, "passkey-grid"), TaskInputs(Path(args.corpus), Path(args.tokenizer)))
        write_jsonl(out / "test.jsonl", rows)
        return {"examples": len(rows), "lengths": grid["lengths"], "depths": grid["depths"], "trials": grid["trials"],
                "max_tokens": max(r["meta"]["n_tokens"] for r in rows)}

    return _build(Path(args.out), job.prov, build)


def run_fetch_bigbench(args) -> int:
    from loopkv.data.bigbench import fetch_sdist

    try:
        print(fetch_sdist(args.dest))
    except LoopKVError as e:
        if not args.if_served:
            raise
        print(f"warning: {e}", file=sys.stderr)
    return 0


def run_bench(job) -> int:
    from loopkv.data.benchmarks import get_benchmark
    from loopkv.utils.atomic import write_jsonl

    bench = get_benchmark(job.args.bench)

    def build(out: Path) -> dict:
        rows, sources = bench.read(job.args.source)
        write_jsonl(out / "test.jsonl", rows)
        # the source files (package, version, sha256) are this result's inputs: a reviewer re-hashes them
        return {"benchmark": bench.name, "kind": bench.kind, "examples": len(rows), "sources": sources}

    return _build(Path(job.args.out), job.prov, build)


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
