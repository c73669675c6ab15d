"""How to spend the cores on a set of jobs, measured in this run: the same Snakemake targets built
with their jobs at `--cores` threads each (one at a time) and at 1 thread each (`--cores` at once),
wall time of each, and whether the outputs are the same files byte for byte.

Run it in a workflow directory where the targets' inputs are built (a finished or partial run);
the targets and the directories given with --clean (their checkpoints: a resumable job would
otherwise resume from its last one) are deleted before each build.

    python benchmarks/job_threads.py --threads-key distill.threads --clean results/distill \\
        --compare codec.pt -- results/distill/lla/4x/codec.pt results/distill/mla_head/4x/codec.pt

Measured this way (2026-12-06, 2 cores, idle machine, two Table 1 distillations at 4x): 2 threads
each in turn 230.6 s, 1 thread each at once 133.2 s (1.73x), codecs byte-identical (README).
"""
from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import tempfile
from pathlib import Path

from dag_time import timed_run   # this directory's: the same Snakemake call, timed


def build(targets: list[str], section: str, key: str, threads: int, cores: int, configfiles: list[str],
          clean: list[str]) -> float:
    for path in [*targets, *clean]:
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"{section}:\n  {key}: {threads}\n")   # last configfile: it wins over the others
    try:
        return timed_run(Path.cwd(), targets, cores, [*configfiles, f.name])
    finally:
        os.unlink(f.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads-key", required=True, help="the jobs' threads key, e.g. distill.threads")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", nargs="*", default=["config/config.yaml"])
    parser.add_argument("--clean", nargs="*", default=[], help="directories deleted before each build")
    parser.add_argument("--compare", nargs="*", default=None,
                        help="compare only outputs whose names end so (default: every target)")
    parser.add_argument("targets", nargs="+")
    args = parser.parse_args()
    if not re.fullmatch(r"[a-z_]+\.threads", args.threads_key):
        parser.error(f"--threads-key must name a section's threads key (e.g. distill.threads), got {args.threads_key!r}")
    section, key = args.threads_key.split(".")

    kept = {}
    walls = {}
    with tempfile.TemporaryDirectory() as keep:
        for threads in (args.cores, 1):
            walls[threads] = build(args.targets, section, key, threads, args.cores, args.configfile, args.clean)
            for i, target in enumerate(args.targets):
                copy = Path(keep, f"{threads}-{i}")
                shutil.copy(target, copy)
                kept[threads, i] = copy
        print(f"{len(args.targets)} jobs on {args.cores} cores: {args.cores} threads each, in turn "
              f"{walls[args.cores]:.1f} s; 1 thread each, {args.cores} at once {walls[1]:.1f} s "
              f"({walls[args.cores] / walls[1]:.2f}x)")
        for i, target in enumerate(args.targets):
            if args.compare is not None and not target.endswith(tuple(args.compare)):
                continue
            same = filecmp.cmp(kept[args.cores, i], kept[1, i], shallow=False)
            print(f"  {target}: {'byte-identical' if same else 'DIFFERS'} at {args.cores} and 1 thread(s)")


if __name__ == "__main__":
    main()
