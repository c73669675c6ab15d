"""Every job of the default DAG runs a declared command with a command line its parser takes, and
what the command declares as its inputs and outputs are the rule's own files: provenance hashes
exactly what Snakemake tracks, and the command writes only where Snakemake expects it."""
import os
import shlex

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


def test_every_rule_runs_a_declared_command_on_its_own_files(workdir):
    parser = build_parser()
    with _dag(workdir, workdir / "micro.yaml") as dag:
        jobs = [(j.rule.name, j.shellcmd, [str(f) for f in j.input], [str(f) for f in j.output])
                for j in dag.jobs if j.rule.name != "all"]
    assert len(jobs) > 50
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
    assert seen == set(job_specs())   # every declaration is used by some rule
