"""Run the workflow in a scratch copy of the repository's workflow files."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MICRO = Path(__file__).parent / "micro.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def copy_workflow(dest: Path) -> Path:
    """Put the Snakefile, workflow/, config/ and the measurements the default config shows
    (benchmarks/measured) in `dest` as a user's clone has them, plus micro.yaml and, where the Ouro paper
    config names BIG-bench's sdist, a stand-in in its layout (tests/bigbench_sdist.py)."""
    from bigbench_sdist import write_sdist

    for name in ("Snakefile", "workflow", "config", "benchmarks/measured"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    shutil.copy(MICRO, dest / "micro.yaml")
    (dest / "downloads").mkdir()
    write_sdist(dest / "downloads/bigbench-1.0.0.tar.gz")
    return dest


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    # a guard against a hung DAG, not a time target: the paper twin's DAG takes ~18 min alone on 2 cores and
    # ~28 beside another worker's DAG under `make test` (two xdist workers)
    proc = subprocess.run([*SNAKEMAKE, "--cores", "2", *args], cwd=workdir, capture_output=True, text=True,
                          timeout=3600)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def planned_jobs(workdir: Path, *args: str) -> dict[str, int]:
    """Rule -> job count of a dry run."""
    out = snakemake(workdir, "-n", "--quiet", "rules", *args).stdout
    jobs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            jobs[parts[0]] = int(parts[1])
    return jobs


def planned_outputs(workdir: Path, *args: str) -> dict[str, str]:
    """Output file -> Snakemake's reason, for every job a dry run would run."""
    out = snakemake(workdir, "-n", *args).stdout
    planned, outputs = {}, []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("output:"):
            outputs = [p.strip() for p in line.removeprefix("output:").split(",")]
        elif line.startswith("reason:"):
            planned.update({p: line.removeprefix("reason:").strip() for p in outputs})
    return planned
