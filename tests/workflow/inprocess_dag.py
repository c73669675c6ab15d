"""Snakemake's own rerun decision, many times in one process: parse the workflow with a config and
list the jobs a dry run would run (what `snakemake -n` prints), without paying Python's and torch's
start-up for every config. Uses Snakemake's DAG through its API objects."""
from __future__ import annotations

from pathlib import Path

from loopkv.jobs.workflow_dag import built_dag, job_id as _job_id


def _dag(workdir: Path, configfile: Path):
    return built_dag(workdir, [configfile])


def needrun(workdir: Path, configfile: Path) -> dict[tuple[str, str], str]:
    """(rule, its wildcards as "k=v,...") -> the first line of Snakemake's reason, for every job a
    dry run of the default target with `configfile` would run in `workdir`."""
    with _dag(workdir, configfile) as dag:
        return {_job_id(job): str(dag.reason(job)).splitlines()[0] for job in dag.needrun_jobs()}


def dag_jobs(workdir: Path, configfile: Path):
    """Every job of the default target's DAG as {id: (rule, wildcards)} and {id: ids that consume
    its outputs}, finished or not."""
    with _dag(workdir, configfile) as dag:
        jobs = {_job_id(j): (j.rule, dict(j.wildcards_dict)) for j in dag.jobs}
        dependants = {_job_id(j): {_job_id(d) for d in dag.depending[j]} for j in dag.jobs}
    return jobs, dependants


def rerun_counts(workdir: Path, configfile: str | Path) -> dict[str, int]:
    """Rule -> job count of a dry run (what workflow_helpers.planned_jobs reads from `snakemake -n`)."""
    counts: dict[str, int] = {}
    for rule, _ in needrun(workdir, workdir / configfile):
        counts[rule] = counts.get(rule, 0) + 1
    return counts


def dag_state(workdir: Path, configfile: Path):
    """needrun(...) and dag_jobs(...) of one config from one DAG build (half the cost of both)."""
    with _dag(workdir, configfile) as dag:
        planned = {_job_id(job): str(dag.reason(job)).splitlines()[0] for job in dag.needrun_jobs()}
        jobs = {_job_id(j): (j.rule, dict(j.wildcards_dict)) for j in dag.jobs}
        dependants = {_job_id(j): {_job_id(d) for d in dag.depending[j]} for j in dag.jobs}
    return planned, (jobs, dependants)
