"""`loopkv dag-profile`: where a run's time went, read from its Snakemake benchmark files
(jobs/dag_profile.py), for the DAG of the targets and config the run used."""
from __future__ import annotations

import argparse
from pathlib import Path

from loopkv.errors import LoopKVError


def register(sub) -> None:
    p = sub.add_parser(
        "dag-profile",
        help="per-stage wall/CPU time and peak RSS of a run, its critical path and what bounds its wall time",
        description="Build the DAG of TARGETS (default: the Snakefile's default target) as Snakemake would "
                    "in --workdir with the config files, read each job's benchmark file and print a Markdown "
                    "profile: totals, lower bounds on the wall time (critical path, the cores' occupancy), "
                    "per-stage sums, the slowest jobs and the critical path.",
    )
    p.add_argument("targets", nargs="*", default=[], help="Snakemake targets (files or rule names), as snakemake takes them")
    p.add_argument("--configfile", "--configfiles", dest="configfiles", nargs="+", action="extend", default=[],
                   metavar="FILE", help="the config files the run used (snakemake's option); it takes every "
                                        "file that follows, so name the targets first")
    p.add_argument("--workdir", default=".", help="the directory the workflow ran in (default: here)")
    p.add_argument("--cores", type=int, default=2, help="cores the bounds assume (default 2, the reference machine)")
    p.add_argument("--top", type=int, default=10, help="how many of the slowest jobs to list (default 10)")
    p.add_argument("--csv", help="also write one row per job here")
    p.add_argument("--out", help="write the Markdown here instead of printing it")
    p.set_defaults(func=dag_profile)


def dag_profile(args: argparse.Namespace) -> int:
    from loopkv.jobs.dag_profile import Profile, jobs_of_dag, render, write_csv
    from loopkv.jobs.workflow_dag import built_dag

    if args.cores < 1:
        raise LoopKVError(f"--cores must be at least 1, not {args.cores}")
    if args.top < 0:
        raise LoopKVError(f"--top must be at least 0, not {args.top}")
    workdir = Path(args.workdir).resolve()
    missing = [f for f in args.configfiles if not Path(f).is_file()]
    if missing:
        raise LoopKVError(f"no such config file: {', '.join(missing)}")
    with built_dag(workdir, args.configfiles, args.targets, cores=args.cores) as dag:
        jobs = jobs_of_dag(dag, workdir)
    profile = Profile(jobs, args.cores)
    text = render(profile, top=args.top)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    if args.csv:
        write_csv(profile, args.csv)
    return 0
