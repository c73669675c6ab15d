"""Do two revisions of loopkv compute the same tables? Each revision is checked out in its own git
worktree, its workflow is copied the way that revision's workflow tests copy it (Snakefile, workflow/,
config/, the test config, the BIG-bench stand-in), run from nothing with that revision's own package
(PYTHONPATH), and the reports of the two runs are compared file by file, byte for byte; for a CSV that
differs, the differing cells are listed so each can be explained.

    python benchmarks/compare_revisions.py --before fdb97f5^ --after HEAD     # micro config, default target
    python benchmarks/compare_revisions.py --before 927e72b --overlay mla.yaml --targets reports/table1.csv

--overlay files (read from where you run it, not from the revisions) are layered over the revision's
config file in both runs: the same change of config (a method added to the micro Table 1, say) for both.

Tables of timings (serving speed, kernel timings and the claims resting on them, the measured memory
curves) are measurements of one run: they are listed as "timed" and do not decide the exit status.
Exit status 0: every other report is byte-identical.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# measurements of their run: wall times (as in test_determinism.py) and the process's memory and seconds
# as generation proceeds (MELT's memory figure)
TIMED = {"table5.csv", "table13.csv", "claims.csv", "fig_memory_vs_length.json"}
COMPARED = ("*.csv", "*.json")
# the revision's own copy of its workflow, as its workflow tests make it
_COPY = ("import sys; from pathlib import Path; sys.path[:0] = ['tests', 'tests/workflow']; "
         "from workflow_helpers import copy_workflow; copy_workflow(Path(sys.argv[1]))")


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def run_revision(rev: str, dest: Path, configfile: str, overlays: list[Path], targets: list[str],
                 cores: int) -> Path:
    """The revision's workflow run from nothing in dest/workflow; returns that directory."""
    tree, workdir = dest / "tree", dest / "workflow"
    git("worktree", "add", "--detach", str(tree), rev)
    env = dict(os.environ, PYTHONPATH=str(tree / "src"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    workdir.mkdir()
    subprocess.run([sys.executable, "-c", _COPY, str(workdir)], cwd=tree, env=env, check=True)
    configs = ["compare.yaml"] + [f"overlay{n}.yaml" for n in range(len(overlays))]
    for src, name in zip([tree / configfile, *overlays], configs):
        shutil.copy(src, workdir / name)
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile", *configs, "--", *targets]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    (dest / "snakemake.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{rev}: snakemake failed in {workdir}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return workdir


def differing_cells(before: Path, after: Path, limit: int) -> list[str]:
    """'row r, column c: before -> after' for the cells that differ (row and column counts first)."""
    rows = [list(csv.reader(open(p, newline=""))) for p in (before, after)]
    if len(rows[0]) != len(rows[1]):
        return [f"{len(rows[0])} rows -> {len(rows[1])} rows"]
    header = rows[0][0] if rows[0] else []
    cells = []
    for r, (a, b) in enumerate(zip(*rows)):
        if len(a) != len(b):
            cells.append(f"row {r}: {len(a)} columns -> {len(b)}")
            continue
        key = a[0] if a else ""
        cells += [f"row {r} ({key}), {header[c] if c < len(header) else c}: {x} -> {y}"
                  for c, (x, y) in enumerate(zip(a, b)) if x != y]
    return cells[:limit] + ([f"... {len(cells) - limit} more"] if len(cells) > limit else [])


def compare_reports(before: Path, after: Path, limit: int) -> bool:
    names = sorted({p.name for d in (before, after) for pattern in COMPARED for p in d.glob(pattern)})
    same = True
    for name in names:
        a, b = before / name, after / name
        if not (a.exists() and b.exists()):
            print(f"ONLY IN {'after' if b.exists() else 'before'}  {name}")
            same = False
            continue
        if a.read_bytes() == b.read_bytes():
            print(f"identical      {name}")
            continue
        timed = name in TIMED
        print(f"{'differs (timed)' if timed else 'DIFFERS':<15}{name}")
        if name.endswith(".csv"):
            for cell in differing_cells(a, b, limit):
                print(f"    {cell}")
        same = same and timed
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision of the reference run")
    parser.add_argument("--after", default="HEAD", help="git revision compared with it (default HEAD)")
    parser.add_argument("--configfile", default="tests/workflow/micro.yaml",
                        help="config file, a path inside each revision's tree (default: the micro config)")
    parser.add_argument("--overlay", action="append", default=[], type=Path, metavar="FILE",
                        help="a config file layered over --configfile in both runs (repeatable)")
    parser.add_argument("--targets", nargs="*", default=[], help="targets (default: the default target)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--cells", type=int, default=20, help="differing cells listed per CSV")
    parser.add_argument("--scratch", help="directory for the two runs (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the worktrees and runs")
    args = parser.parse_args()
    for overlay in args.overlay:
        if not overlay.is_file():
            parser.error(f"--overlay {overlay}: no such file")
    overlays = [o.resolve() for o in args.overlay]   # copied from each run's own directory
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="loopkv-compare-"))
    revs = {"before": git("rev-parse", args.before), "after": git("rev-parse", args.after)}
    runs = {}
    try:
        for name, rev in revs.items():
            config = " + ".join([args.configfile, *map(str, args.overlay)])
            print(f"# {name}: {rev[:12]}, {config}, on {args.cores} cores", flush=True)
            runs[name] = run_revision(rev, scratch / name, args.configfile, overlays, args.targets, args.cores)
        same = compare_reports(runs["before"] / "reports", runs["after"] / "reports", args.cells)
    finally:
        if not args.keep:
            for name in revs:
                if (scratch / name / "tree").exists():
                    git("worktree", "remove", "--force", str(scratch / name / "tree"))
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{'every untimed report byte-identical' if same else 'REPORTS DIFFER'} "
          f"({revs['before'][:12]} -> {revs['after'][:12]})")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
