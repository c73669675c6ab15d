"""Where a finished (or partly finished) run's time went: every job of the DAG with the wall time, CPU
time and peak RSS its Snakemake `benchmark:` file recorded, summed by stage, and what bounds the
run's wall time on a given number of cores:

- the critical path: the longest chain of dependent jobs, by recorded wall time (no number of cores
  finishes sooner);
- the occupancy bound: every job's wall time times the cores it holds (its threads, at most the
  cores), over the cores (no schedule on that many cores finishes sooner);
- the span the run took: first job's start to last job's end, from each benchmark file's time of
  writing less its wall time. Snakemake writes (touches) it when it registers the job's end, so the
  times carry its scheduling delay; a copy that does not keep file times, or `snakemake --touch`,
  makes them meaningless. Only meaningful for a run from nothing in one invocation.

A stage is the directory the rule's benchmark file sits in under `benchmarks/` (the rules file theirs
by stage: data, teacher, distill, lm_eval, melt, report, ...)."""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from loopkv.errors import LoopKVError

BENCHMARK_COLUMNS = ("s", "cpu_time", "max_rss")   # what Snakemake's benchmark TSV must hold for us
NOT_RUN_LISTED = 20   # jobs without a benchmark file named in the report (the CSV has them all)


@dataclass(frozen=True)
class Timing:
    """One benchmark file: the job's wall seconds, CPU seconds, peak RSS (MiB) and end (epoch s)."""
    wall_s: float
    cpu_s: float | None
    max_rss_mib: float | None
    end: float

    @property
    def start(self) -> float:
        return self.end - self.wall_s


@dataclass
class JobRecord:
    rule: str
    wildcards: str
    stage: str
    threads: int
    benchmark: str | None
    depends_on: list[int] = field(default_factory=list)   # indices into the profile's jobs
    timing: Timing | None = None   # None: the job has not run (or has no benchmark file)


def _number(value: str, column: str, path: Path) -> float | None:
    """A benchmark cell: Snakemake writes '-' or 'NA' where it measured nothing (a job too short for
    its sampler), which is None here; anything else must be a finite number."""
    if value.strip() in ("-", "NA", ""):
        return None
    try:
        number = float(value)
    except ValueError:
        raise LoopKVError(f"{path}: column {column!r} holds {value!r}, not a number") from None
    if not math.isfinite(number) or number < 0:
        raise LoopKVError(f"{path}: column {column!r} holds {value!r}, not a finite non-negative number")
    return number


def read_benchmark(path: str | Path) -> Timing:
    """The last row of a Snakemake benchmark TSV (a rule with `repeat` writes several; the last is
    the run that produced the outputs)."""
    path = Path(path)
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        end = path.stat().st_mtime
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise LoopKVError(f"{path}: cannot read the benchmark file: {e}") from e
    if not rows:
        raise LoopKVError(f"{path}: no benchmark row (an empty or truncated file)")
    row = rows[-1]
    missing = [c for c in BENCHMARK_COLUMNS if row.get(c) is None]
    if missing:
        raise LoopKVError(f"{path}: not a Snakemake benchmark file: no column {', '.join(missing)}")
    wall = _number(row["s"], "s", path)
    if wall is None:
        raise LoopKVError(f"{path}: column 's' (wall seconds) is empty")
    return Timing(wall, _number(row["cpu_time"], "cpu_time", path), _number(row["max_rss"], "max_rss", path), end)


def stage_of(benchmark: str | None, rule: str) -> str:
    """The directory under `benchmarks/` a benchmark file sits in; the rule's name without one."""
    dirs = Path(benchmark).parts[:-1] if benchmark else ()
    if "benchmarks" in dirs:
        below = dirs[len(dirs) - dirs[::-1].index("benchmarks"):]
        if below:
            return "/".join(below)
    return rule


def jobs_of_dag(dag, workdir: Path) -> list[JobRecord]:
    """A JobRecord per job of a built Snakemake DAG (jobs/workflow_dag.built_dag), dependencies
    first, each with its benchmark file read where it exists."""
    from loopkv.jobs.workflow_dag import job_id

    order = list(_topological(dag))
    index = {id(job): i for i, job in enumerate(order)}
    records = []
    for job in order:
        benchmark = str(job.benchmark) if job.benchmark else None
        rule, wildcards = job_id(job)
        record = JobRecord(rule, wildcards, stage_of(benchmark, rule), int(job.threads), benchmark,
                           sorted(index[id(dep)] for dep in dag.dependencies[job]))
        if benchmark and (workdir / benchmark).is_file():
            record.timing = read_benchmark(workdir / benchmark)
        records.append(record)
    return records


def _topological(dag):
    seen, order = set(), []

    def visit(job):
        stack = [(job, iter(dag.dependencies[job]))]
        seen.add(id(job))
        while stack:
            current, deps = stack[-1]
            for dep in deps:
                if id(dep) not in seen:
                    seen.add(id(dep))
                    stack.append((dep, iter(dag.dependencies[dep])))
                    break
            else:
                stack.pop()
                order.append(current)

    for job in sorted(dag.jobs, key=lambda j: (j.rule.name, str(sorted(j.wildcards_dict.items())))):
        if id(job) not in seen:
            visit(job)
    return order


@dataclass
class Profile:
    jobs: list[JobRecord]
    cores: int

    @property
    def timed(self) -> list[JobRecord]:
        return [j for j in self.jobs if j.timing is not None]

    @property
    def not_run(self) -> list[JobRecord]:
        """Jobs whose rule declares a benchmark file that is not there (not run yet, or failed)."""
        return [j for j in self.jobs if j.benchmark and j.timing is None]

    def critical_path(self) -> tuple[float, list[int]]:
        """(seconds, job indices from first to last) of the longest dependent chain; jobs are in
        dependency order, so one pass finds it. An untimed job weighs nothing."""
        finish: list[float] = []
        via: list[int | None] = []
        for job in self.jobs:
            best, best_dep = 0.0, None
            for d in job.depends_on:
                if finish[d] > best:
                    best, best_dep = finish[d], d
            finish.append(best + (job.timing.wall_s if job.timing else 0.0))
            via.append(best_dep)
        if not finish:
            return 0.0, []
        last = max(range(len(finish)), key=lambda i: (finish[i], i))   # a tie goes to the later job: the target
        path = [last]
        while via[path[-1]] is not None:
            path.append(via[path[-1]])
        return finish[last], path[::-1]

    def occupancy_bound(self) -> float:
        """Core-seconds the jobs held (wall x threads, at most the cores) over the cores."""
        return sum(j.timing.wall_s * min(j.threads, self.cores) for j in self.timed) / self.cores

    def span(self) -> float:
        timed = self.timed
        return max(j.timing.end for j in timed) - min(j.timing.start for j in timed) if timed else 0.0

    def by_stage(self) -> list[dict]:
        """Per stage: jobs, wall and CPU seconds summed, core-seconds held, the largest peak RSS, and
        its span (first start to last end of its jobs: the stage's own wall time in a run from
        nothing); most core-seconds first."""
        stages: dict[str, dict] = {}
        for job in self.jobs:
            row = stages.setdefault(job.stage, {"stage": job.stage, "jobs": 0, "timed": 0, "wall_s": 0.0,
                                                "cpu_s": 0.0, "core_s": 0.0, "max_rss_mib": 0.0, "first": math.inf,
                                                "last": -math.inf})
            row["jobs"] += 1
            if job.timing:
                row["timed"] += 1
                row["wall_s"] += job.timing.wall_s
                row["cpu_s"] += job.timing.cpu_s or 0.0
                row["core_s"] += job.timing.wall_s * min(job.threads, self.cores)
                row["max_rss_mib"] = max(row["max_rss_mib"], job.timing.max_rss_mib or 0.0)
                row["first"] = min(row["first"], job.timing.start)
                row["last"] = max(row["last"], job.timing.end)
        for row in stages.values():
            row["span_s"] = row["last"] - row["first"] if row["timed"] else 0.0
        return sorted(stages.values(), key=lambda r: (-r["core_s"], r["stage"]))


def render(profile: Profile, top: int = 10) -> str:
    """The profile as Markdown: totals and bounds, the stage table, the slowest jobs, the critical path."""
    timed = profile.timed
    lines = [f"# DAG profile: {len(timed)} of {len(profile.jobs)} jobs timed, bounds on {profile.cores} cores", ""]
    if profile.not_run:
        names = [_name(j) for j in profile.not_run]
        shown = ", ".join(names[:NOT_RUN_LISTED]) + (f" and {len(names) - NOT_RUN_LISTED} more"
                                                     if len(names) > NOT_RUN_LISTED else "")
        lines += [f"Without a benchmark file yet (not run, or failed; they count as zero below): {shown}.", ""]
    undeclared = sorted({j.rule for j in profile.jobs if not j.benchmark})
    if undeclared:
        lines += [f"Rules that declare no benchmark (target rules; count as zero): {', '.join(undeclared)}.", ""]
    critical, path = profile.critical_path()
    total_wall = sum(j.timing.wall_s for j in timed)
    total_cpu = sum(j.timing.cpu_s or 0.0 for j in timed)
    occupancy = profile.occupancy_bound()
    bound = max(critical, occupancy)
    span = profile.span()
    lines += ["| measure | seconds | minutes |", "|---|---:|---:|"]
    for name, seconds in (("jobs' wall time, summed", total_wall), ("jobs' CPU time, summed", total_cpu),
                          ("critical path (any number of cores)", critical),
                          (f"occupancy bound ({profile.cores} cores)", occupancy),
                          ("span: first start to last end", span)):
        lines.append(f"| {name} | {seconds:.0f} | {seconds / 60:.1f} |")
    if span and bound:
        binding = "the critical path" if critical >= occupancy else f"the {profile.cores} cores' occupancy"
        lines += ["", f"What bounds it: {binding} ({bound / 60:.1f} min); the span is {span / bound:.2f}x that bound."]
    lines += ["", "## By stage", "", "| stage | jobs | timed | wall s | CPU s | core-s held | share | span s | peak RSS MiB |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    stages = profile.by_stage()
    held = sum(r["core_s"] for r in stages) or 1.0
    for r in stages:
        lines.append(f"| {r['stage']} | {r['jobs']} | {r['timed']} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | "
                     f"{r['core_s']:.0f} | {r['core_s'] / held:.1%} | {r['span_s']:.0f} | {r['max_rss_mib']:.0f} |")
    if top:
        lines += ["", f"## The {top} slowest jobs", "", "| job | threads | wall s | CPU s | peak RSS MiB |",
                  "|---|---:|---:|---:|---:|"]
    for job in sorted(timed, key=lambda j: -j.timing.wall_s)[:top]:
        lines.append(f"| {_name(job)} | {job.threads} | {job.timing.wall_s:.0f} | {job.timing.cpu_s or 0:.0f} | "
                     f"{job.timing.max_rss_mib or 0:.0f} |")
    lines += ["", "## Critical path", "", "| job | wall s | cumulative s |", "|---|---:|---:|"]
    cumulative = 0.0
    for i in path:
        job = profile.jobs[i]
        wall = job.timing.wall_s if job.timing else 0.0
        cumulative += wall
        lines.append(f"| {_name(job)} | {wall:.0f} | {cumulative:.0f} |")
    return "\n".join(lines) + "\n"


def _name(job: JobRecord) -> str:
    return f"{job.rule}[{job.wildcards}]" if job.wildcards else job.rule


def write_csv(profile: Profile, path: str | Path) -> None:
    """One row per job: what the Markdown report sums."""
    _, path_jobs = profile.critical_path()
    on_path = set(path_jobs)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rule", "wildcards", "stage", "threads", "wall_s", "cpu_s", "max_rss_mib", "start", "end",
                    "critical_path", "benchmark"])
        for i, job in enumerate(profile.jobs):
            t = job.timing
            w.writerow([job.rule, job.wildcards, job.stage, job.threads,
                        *(("", "", "", "", "") if t is None else
                          (t.wall_s, "" if t.cpu_s is None else t.cpu_s, "" if t.max_rss_mib is None else t.max_rss_mib,
                           f"{t.start:.2f}", f"{t.end:.2f}")),
                        i in on_path, job.benchmark or ""])
