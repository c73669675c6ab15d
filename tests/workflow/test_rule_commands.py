"""Every job of the default DAG runs a declared command with a command line its parser takes, and
what the command declares as its inputs and outputs are the rule's own files: provenance hashes
exactly what Snakemake tracks, and the command writes only where Snakemake expects it."""
import os
import shlex

import yaml

from inprocess_dag import _dag
from loopkv.cli import build_parser
from loopkv.jobs.declared import job_specs


def _paths(arg, value):
    if value is None:
        return []
    if arg.kind == "named":
        return [path for _, path in value]
    return list(value) if isinstance(value, list) else [value]


def _covers(path, files):
    """A command's path names a rule file, or the directory holding one (model and data directories)."""
    path = os.path.normpath(path)
    return any(path == os.path.normpath(f) or path == os.path.dirname(os.path.normpath(f)) for f in files)


# Commands the micro config's default DAG does not run, and why; the DAG of a micro variant that
# runs them checks their command lines instead (the last test).
NOT_IN_MICRO = {
    # built when lm_eval.models serves melt and lm_eval.tasks runs one of MELT Table 1's benchmarks:
    # micro runs one (humaneval), so serving melt/2x would do, and add MELT on each of micro's 5 lm-eval
    # tasks: 6 shard jobs (each starting torch, lm-eval and a model) and 5 merges, far over the 20 s a
    # change may add to every micro run, for a report that only lays out lm-eval results
    "melt-table1": "MELT Table 1 through lm-eval",
}


def _check_jobs(parser, jobs) -> set[str]:
    """Every job runs a declared command its parser takes, on the rule's own files; the commands seen."""
    seen = set()
    for rule, shellcmd, inputs, outputs in jobs:
        argv = shlex.split(shellcmd.split(" > ")[0])
        assert argv[0] == "loopkv", (rule, shellcmd[:80])
        args = parser.parse_args(argv[1:])   # exits (fails the test) on a flag the command lacks
        spec = job_specs()[args.command]
        seen.add(args.command)
        for arg in spec.inputs:
            for path in _paths(arg, getattr(args, arg.dest)):
                assert _covers(path, inputs), (rule, arg.name, path)
        for arg in spec.outputs:
            for path in _paths(arg, getattr(args, arg.dest)):
                assert _covers(path, outputs), (rule, arg.name, path)
        if spec.reads:
            assert "threads" not in str(sorted(args.cfg)) and "launch" not in args.cfg, rule
    return seen


def _jobs(dag, rules=None):
    return [(j.rule.name, j.shellcmd, [str(f) for f in j.input], [str(f) for f in j.output])
            for j in dag.jobs if j.rule.name != "all" and (rules is None or j.rule.name in rules)]


def test_every_rule_runs_a_declared_command_on_its_own_files(workdir):
    parser = build_parser()
    with _dag(workdir, workdir / "micro.yaml") as dag:
        jobs = _jobs(dag)
    assert len(jobs) > 50
    seen = _check_jobs(parser, jobs)
    # every declaration is used by some rule of the micro DAG, or listed (and checked) below
    assert seen == set(job_specs()) - set(NOT_IN_MICRO) and set(NOT_IN_MICRO) <= set(job_specs())


def test_the_commands_not_in_micro_on_a_micro_variant_that_runs_them(workdir):
    """NOT_IN_MICRO's commands on the DAG of micro with MELT served through lm-eval (its on-policy and
    passkey-grid parts left out: a smaller DAG)."""
    micro = yaml.safe_load((workdir / "micro.yaml").read_text())
    micro["lm_eval"]["models"].append("melt/2x")   # MELT's budget is T = 2 here
    micro.update(on_policy={**micro["on_policy"], "budgets": []}, passkey_grid={**micro["passkey_grid"], "models": []})
    (workdir / "micro_melt.yaml").write_text(yaml.safe_dump(micro))
    with _dag(workdir, workdir / "micro_melt.yaml") as dag:
        jobs = _jobs(dag, {"melt_table1"})
    assert _check_jobs(build_parser(), jobs) == set(NOT_IN_MICRO)
    # humaneval, the one MELT Table 1 benchmark micro runs, of the teacher and MELT (not LLA's)
    assert sorted(jobs[0][2]) == ["results/lm_eval/full/1x/humaneval.json", "results/lm_eval/melt/2x/humaneval.json"]
