"""Snakemake killed (SIGKILL, its whole process group) in the middle of a DAG: after `--unlock`, the
rerun redoes no node Snakemake had recorded as finished, redoes every node it had not, and ends with
the same table as an uninterrupted run (no partial output consumed)."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from workflow_helpers import SNAKEMAKE, planned_outputs, snakemake

pytestmark = pytest.mark.slow

TARGET = "reports/table1.pdf"


def _planned(workdir) -> dict[str, str]:
    return planned_outputs(workdir, "--rerun-incomplete", TARGET, "--configfile", "micro.yaml")


def _incomplete(workdir) -> set[str]:
    """The outputs Snakemake itself calls incomplete (a plain dry run refuses them and lists them)."""
    out = snakemake(workdir, "-n", TARGET, "--configfile", "micro.yaml", check=False)
    text = out.stdout + out.stderr
    if "Incomplete files:" not in text:
        return set()
    return {line.strip() for line in text.split("Incomplete files:", 1)[1].splitlines()
            if line.strip().startswith("results/")}


def _finished_jobs(log) -> int:
    return len(re.findall(r"Finished jobid: \d+ \(Rule: method_eval\)", log.read_text()))


def test_snakemake_killed_mid_dag_redoes_no_finished_node(finished, tmp_path):
    work = tmp_path / "dag"
    shutil.copytree(finished, work, symlinks=True)
    shutil.rmtree(work / "results/methods")                  # every Table 1 cell must be recomputed
    for table in (work / "reports").glob("table1.*"):
        table.unlink()
    cells = sorted(p for p in _planned(work) if p.startswith("results/methods/") and p.endswith("/quality.json"))
    assert len(cells) >= 4                                    # Table 1's cells, all to be recomputed

    log = tmp_path / "snakemake.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen([*SNAKEMAKE, "--cores", "2", TARGET, "--configfile", "micro.yaml"], cwd=work,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 600
        while _finished_jobs(log) < 1:                       # Snakemake has recorded at least one cell
            assert proc.poll() is None and time.time() < deadline, "the DAG ended before it could be killed"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)                  # Snakemake and every job it runs
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert _finished_jobs(log) < len(cells), "kill the DAG in the middle"

    snakemake(work, "--unlock", "--configfile", "micro.yaml")   # a killed Snakemake leaves its lock, as documented
    planned = _planned(work)
    incomplete = _incomplete(work)
    recorded = [c for c in cells if (work / c).exists() and c not in planned]
    assert len(recorded) >= 1
    for cell in cells:
        if cell in planned and (work / cell).exists():
            # written, but its job never seen to end: Snakemake must not trust it (--rerun-incomplete
            # reruns it as a forced job)
            assert cell in incomplete, (cell, planned[cell], incomplete)
        if not (work / cell).exists():
            assert cell in planned, cell
    assert not {c for c in incomplete if c in cells} - set(planned)
    assert TARGET in planned
    before = {c: ((work / c).stat().st_mtime_ns, (work / c).read_bytes()) for c in recorded}

    snakemake(work, TARGET, "--rerun-incomplete", "--configfile", "micro.yaml")
    for cell, (mtime, data) in before.items():
        assert (work / cell).stat().st_mtime_ns == mtime and (work / cell).read_bytes() == data, f"{cell} was redone"
    # the resumed DAG's table is the uninterrupted run's, byte for byte
    assert (work / "reports/table1.csv").read_bytes() == (finished / "reports/table1.csv").read_bytes()
    assert not list(work.glob("results/methods/**/*.tmp"))
    assert _planned(work) == {}
    verify = subprocess.run([*SNAKEMAKE[:1], "-m", "loopkv", "verify", "results"], cwd=work,
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
