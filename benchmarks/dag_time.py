"""The workflow's wall time from nothing, measured in this run: each target set is run by Snakemake in
its own scratch copy of the workflow (Snakefile, workflow/, config/, benchmarks/measured, as a clone
has them; no results), timed, then profiled from its jobs' benchmark files (`loopkv dag-profile`:
per-stage sums and spans, the critical path, the cores' occupancy bound).

    python benchmarks/dag_time.py                      # the default target, then reports/table1.pdf alone
    python benchmarks/dag_time.py --targets reports/table1.pdf --cores 2 --configfile my.yaml

The machine's load matters: run it on an otherwise idle machine and say so beside the numbers. The
scratch copies are kept (--keep) or removed; a failed run prints the tail of Snakemake's output.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLONE_FILES = ("Snakefile", "workflow", "config", "benchmarks/measured")


def scratch_workflow(dest: Path) -> Path:
    for name in CLONE_FILES:
        src = REPO / name
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest


def timed_run(dest: Path, targets: list[str], cores: int, configfiles: list[str]) -> float:
    config = ["--configfile", *[str(Path(f).resolve()) for f in configfiles]] if configfiles else []
    # "--" ends --configfile's list: without it the targets would be read as config files
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *config, "--", *targets]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (dest / "snakemake.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(targets) or '(default target)'} failed after {wall:.0f} s "
                         f"in {dest}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="*", action="append", default=None, metavar="TARGET",
                        help="one run's targets (repeat the flag for another run; no targets = the default target). "
                             "Default: the default target, then reports/table1.pdf")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", nargs="+", default=[], help="config files for every run")
    parser.add_argument("--scratch", help="directory for the scratch copies (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies (results, logs, benchmarks)")
    args = parser.parse_args()
    runs = args.targets if args.targets is not None else [[], ["reports/table1.pdf"]]
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="loopkv-dag-time-"))
    scratch.mkdir(parents=True, exist_ok=True)
    summary = []
    for n, targets in enumerate(runs):
        dest = scratch_workflow(scratch / f"run{n}")
        name = " ".join(targets) or "default target"
        print(f"# {name}: running in {dest} on {args.cores} cores (load average before: {os.getloadavg()[0]:.2f})",
              flush=True)
        wall = timed_run(dest, targets, args.cores, args.configfile)
        summary.append((name, wall))
        print(f"# {name}: {wall:.0f} s wall ({wall / 60:.1f} min) from nothing\n", flush=True)
        profile = [sys.executable, "-m", "loopkv.cli", "dag-profile", *targets, "--workdir", str(dest),
                   "--cores", str(args.cores), "--csv", str(dest / "dag_profile.csv")]
        if args.configfile:
            profile += ["--configfile", *[str(Path(f).resolve()) for f in args.configfile]]
        subprocess.run(profile, check=True)
        if not args.keep:
            shutil.rmtree(dest)
    print("\n| run | wall s | wall min |\n|---|---:|---:|")
    for name, wall in summary:
        print(f"| {name} | {wall:.0f} | {wall / 60:.1f} |")


if __name__ == "__main__":
    main()
