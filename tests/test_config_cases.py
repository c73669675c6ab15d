"""Malformed configs refused by `loopkv config-check` and by `snakemake -n` before any job, each naming
the key; the repository's own configs accepted by both with the same merged config (issue 20).

The malformed configs are overlays in tests/config_cases/malformed (first line `# key: KEY`, the key
the first problem must name; JSON files in JSON_KEYS), each merged over config/config.yaml as a user's
`--configfile` is. Snakemake runs as its real command line (snakemake.cli.main: argument parsing, its
config-file parse and merge, the Snakefile) in a child forked from a forkserver that imported Snakemake
and loopkv once, about 0.3 s a case instead of 5 s a process; a sample also runs as real processes.
"""
from __future__ import annotations

import copy
import itertools
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import yaml

from loopkv import cli
from loopkv.config import (
    load_workflow_config, parse_config_args, read_config_file, update_config, workflow_config,
)
from loopkv.errors import LoopKVError

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "config_cases" / "malformed"
JSON_KEYS = {"nan-steps-json": "distill.steps", "infinite-lr-json": "melt.stage1.lr",
             "float-batch-json": "teacher.batch_size", "json-key-twice": "seed"}
# (files, --config values, key): what the command line adds to a file
ARG_CASES = {
    "config-arg-nan-seed": ([], ["seed=nan"], "seed"),                          # --config reads nan as a float
    "config-arg-text-steps": ([], ["teacher={'steps': 5}"], "teacher.steps"),   # its YAML values stay text
    "config-arg-results-dir-under-a-file": ([], ["results_dir=Snakefile/x"], "results_dir"),
    "second-file-is-bad": (["micro.yaml", "cases/huge-batch.yaml"], [], "teacher.batch_size"),
}
# cases a real `snakemake -n` and `python -m loopkv config-check` process also run
REAL_PROCESS_SAMPLE = ["nan-k-share", "results-dir-under-a-file", "nan-steps-json", "yaml-key-twice"]
PRELOAD = ["snakemake.cli", "snakemake.api", "loopkv.config", "loopkv.cache.settings", "loopkv.data.benchmarks",
           "loopkv.serve.bench", "loopkv.train.melt_recipes", "loopkv.eval.lm_tasks", "yte"]


def _case_key(path: Path) -> str:
    if path.suffix == ".json":
        return JSON_KEYS[path.stem]
    match = re.match(r"# key: (\S+)\n", path.read_text())
    assert match, f"{path.name}: the first line must be '# key: KEY'"
    return match.group(1)


def _cases() -> dict[str, tuple[list[str], list[str], str]]:
    files = {p.stem: ([f"cases/{p.name}"], [], _case_key(p)) for p in sorted(CASES.iterdir())}
    return {**files, **ARG_CASES}


MALFORMED = _cases()


# ---------------------------------------------------------------- the workflow copy and the runner


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, bigbench_sdist) -> Path:
    """The workflow as a user's clone has it, the repository's config files at their paths, the cases,
    a checkpoint directory for the paper configs (planning reads only its config.json) and the
    stand-in BIG-bench sdist where the Ouro paper config names it."""
    dest = tmp_path_factory.mktemp("configs")
    for name in ("Snakefile", "workflow", "config", "benchmarks/measured"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    for path in [*ROOT.glob("tests/workflow/*.yaml"), ROOT / "benchmarks/gpu_smoke.yaml"]:
        (dest / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest / path.relative_to(ROOT))
    shutil.copy(ROOT / "tests/workflow/micro.yaml", dest / "micro.yaml")
    shutil.copytree(CASES, dest / "cases")
    for name in ("Ouro-1.4B", "Ouro-2.6B"):
        (dest / f"checkpoints/{name}").mkdir(parents=True)
        (dest / f"checkpoints/{name}/config.json").write_text("{}")
    (dest / "downloads").mkdir()
    shutil.copy(bigbench_sdist, dest / "downloads/bigbench-1.0.0.tar.gz")
    # Huginn's: the released checkpoint's fields (our HuginnConfig's defaults), which the paper config's
    # shape keys are checked against under Huginn's names
    from loopkv.models.configuration_huginn import HuginnConfig

    (dest / "checkpoints/Huginn-0125").mkdir(parents=True)
    (dest / "checkpoints/Huginn-0125/config.json").write_text(HuginnConfig().to_json_string())
    return dest


@pytest.fixture(scope="module")
def forkserver():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*PRELOAD, __name__])
    yield ctx
    stop = getattr(multiprocessing.forkserver._forkserver, "_stop", None)
    if stop is not None:
        stop()


def _snakemake_child(workdir: str, argv: list[str], out: str, dump: str | None) -> None:
    """In a forked child: snakemake's command line in `workdir`, its output into `out`; with `dump`, the
    config Snakemake merged and the Snakefile validated, as JSON (order kept)."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(workdir)
    code = 1
    try:
        if dump:
            import loopkv.config as config_module
            validate = config_module.load_config

            def recording(raw, **kwargs):
                checked = validate(raw, **kwargs)
                Path(dump).write_text(json.dumps({"merged": raw, "validated": checked}))
                return checked

            config_module.load_config = recording    # common.smk imports it when the Snakefile is parsed
        import snakemake.cli
        snakemake.cli.main(["--cores", "1", *argv])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:   # noqa: BLE001 - reported as the test's output
        traceback.print_exc()
        code = 99
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


_RUN = itertools.count()


def snakemake(ctx, workdir: Path, argv: list[str], dump: Path | None = None) -> tuple[int, str]:
    out = workdir / f".snakemake-output-{next(_RUN)}.txt"
    child = ctx.Process(target=_snakemake_child, args=(str(workdir), argv, str(out), dump and str(dump)))
    child.start()
    child.join(300)
    if child.is_alive():
        child.kill()
        raise AssertionError(f"snakemake {argv} still running after 300 s")
    return child.exitcode, out.read_text()


def snakemake_argv(files: list[str], config_args: list[str]) -> list[str]:
    return ["-n", *(["--configfile", *files] if files else []), *(["--config", *config_args] if config_args else [])]


def config_check_argv(files: list[str], config_args: list[str]) -> list[str]:
    return ["config-check", *files, *(["--config", *config_args] if config_args else [])]


@pytest.fixture
def config_check(monkeypatch, capsys, workdir):
    """`loopkv config-check ARGS` in the workflow copy, in-process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("loopkv.config_commands",))
    monkeypatch.chdir(workdir)

    def run(argv: list[str]) -> tuple[int, str, str]:
        code = cli.main(argv)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def assert_refused_before_any_job(code: int, out: str, key: str, workdir: Path, tool: str) -> None:
    assert code != 0, f"{tool} accepted it:\n{out[-3000:]}"
    assert "Traceback" not in out, f"{tool} crashed:\n{out[-3000:]}"
    problems = out.split("invalid config: ", 1)[-1] if tool == "snakemake" else out.split("error: ", 1)[-1]
    assert f"config key '{key}'" in problems.splitlines()[0], f"{tool} does not name {key} first:\n{out[-3000:]}"
    if tool == "snakemake":
        # stopped while the Snakefile was parsed: no DAG, no job, nothing written; the only frame shown
        # is the Snakefile's validation (a frame in loopkv or Snakemake would be a crash)
        assert "Building DAG" not in out and "Job stats" not in out, out[-3000:]
        frames = set(re.findall(r'File "([^"]+)"', out))
        assert frames <= {str(workdir / "workflow/rules/common.smk")}, out[-3000:]
        assert not any((workdir / d).exists() for d in ("results", "reports", "logs")), "a job wrote output"


# ---------------------------------------------------------------- malformed configs


def test_the_case_table_is_large_and_well_formed():
    assert len(MALFORMED) >= 60
    assert set(JSON_KEYS) == {p.stem for p in CASES.glob("*.json")}
    assert {p.suffix for p in CASES.iterdir()} == {".yaml", ".json"}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_config_is_refused_by_both_naming_the_key(name, workdir, forkserver, config_check):
    files, config_args, key = MALFORMED[name]
    code, out, err = config_check(config_check_argv(files, config_args))
    assert out == "" and code == 2, out
    assert_refused_before_any_job(code, err, key, workdir, "config-check")
    code, out = snakemake(forkserver, workdir, snakemake_argv(files, config_args))
    assert_refused_before_any_job(code, out, key, workdir, "snakemake")


@pytest.mark.parametrize("name", REAL_PROCESS_SAMPLE)
def test_real_processes_refuse_a_sample(name, workdir):
    """The same refusals from the two commands as users run them, in processes of their own."""
    files, config_args, key = MALFORMED[name]
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    commands = {"config-check": [sys.executable, "-m", "loopkv", *config_check_argv(files, config_args)],
                "snakemake": [sys.executable, "-m", "snakemake", "--cores", "1", *snakemake_argv(files, config_args)]}
    procs = {tool: subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True) for tool, cmd in commands.items()}
    for tool, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert_refused_before_any_job(proc.returncode, out, key, workdir, tool)


# ---------------------------------------------------------------- the repository's configs

REPOSITORY_CONFIGS = {
    "default": ([], []),
    "config.yaml": (["config/config.yaml"], []),
    "ouro-1.4b": (["config/ouro-1.4b.yaml"], []),
    "micro": (["tests/workflow/micro.yaml"], []),
    "micro+lazy_device": (["tests/workflow/micro.yaml", "tests/workflow/lazy_device.yaml"], []),
    "ouro-1.4b+paper_cpu": (["config/ouro-1.4b.yaml", "tests/workflow/paper_cpu.yaml"], []),
    "ouro-1.4b+gpu_smoke": (["config/ouro-1.4b.yaml", "benchmarks/gpu_smoke.yaml"], []),
    "ouro-1.4b+ouro-2.6b": (["config/ouro-1.4b.yaml", "config/ouro-2.6b.yaml"], []),
    "huginn-tiny": (["config/huginn-tiny.yaml"], []),
    "huginn-3.5b": (["config/huginn-3.5b.yaml"], []),
    "micro+config-args": (["tests/workflow/micro.yaml"], ["seed=7", "results_dir=results/other"]),
    "json-and-yte": (["cases-ok/plain.json", "cases-ok/template.yaml"], []),
    # Snakemake drops config/config.yaml; the Snakefile's load_config fills the overlay from it again
    "ouro-1.4b-replacing": (["config/ouro-1.4b.yaml"], [], "--replace-workflow-config"),
}


def test_every_repository_config_is_in_the_table():
    """config/*.yaml, the workflow tests' configs and the GPU smoke overlay (profiles are not configs)."""
    named = {f for files, *_ in REPOSITORY_CONFIGS.values() for f in files}
    found = {str(p.relative_to(ROOT)) for p in [*ROOT.glob("config/*.yaml"), *ROOT.glob("tests/workflow/*.yaml"),
                                                *ROOT.glob("benchmarks/*.yaml")]}
    assert found <= named, found - named


@pytest.mark.parametrize("name", list(REPOSITORY_CONFIGS))
def test_repository_config_is_accepted_by_both_with_the_same_merge(name, workdir, forkserver, config_check):
    files, config_args, *flags = REPOSITORY_CONFIGS[name]
    replace = "--replace-workflow-config" in flags
    ok = workdir / "cases-ok"
    ok.mkdir(exist_ok=True)
    # JSON (1e-3 is a float there, text in YAML 1.1) and a YTE template, which Snakemake renders
    (ok / "plain.json").write_text('{"teacher": {"lr": 1e-3, "mixture": {"corpus": 1.0}}, "seed": 5}')
    (ok / "template.yaml").write_text("__use_yte__: true\nseed: ?6 * 7\nteacher:\n  steps: ?10 ** 2\n")
    dump = workdir / f"dump-{name}.json"
    code, out = snakemake(forkserver, workdir, [*snakemake_argv(files, config_args), *flags], dump=dump)
    assert code == 0, out[-3000:]
    seen = json.loads(dump.read_text())
    code, printed, err = config_check([*config_check_argv(files, config_args), *flags, "--print-config"])
    assert code == 0, err
    checked = json.loads(printed[printed.index("{"):])
    assert checked == seen["validated"]
    # and key order too (tables list budgets, recipes and models in the merged order)
    merged = workflow_config(files, config_args, base_dir=workdir, replace_workflow_config=replace)
    assert json.dumps(merged) == json.dumps(seen["merged"])
    validated = load_workflow_config(files, config_args, base_dir=workdir, replace_workflow_config=replace)
    assert json.dumps(validated) == json.dumps(seen["validated"])
    if name == "json-and-yte":
        assert (validated["seed"], validated["teacher"]["steps"], validated["teacher"]["lr"]) == (42, 100, 1e-3)
        # a mixture written in part keeps the default's other weights: the merge is Snakemake's
        assert validated["teacher"]["mixture"] == {"corpus": 1.0, "passkey": 0.3, "arithmetic": 0.4}


# ---------------------------------------------------------------- files neither can read


@pytest.mark.parametrize("text, says", [
    ("teacher: [unclosed\n", "not valid YAML"),
    ("- 1\n- 2\n", "must hold a mapping"),
    ("# nothing but a comment\n", "an empty file"),
    ("teacher:\n\tlr: 1.0\n", "not valid YAML"),                     # a tab in the indentation
])
def test_a_file_neither_can_read_stops_both_without_a_traceback(text, says, workdir, forkserver, config_check,
                                                                 tmp_path):
    """Snakemake parses --configfile files before the Snakefile runs and stops with its own message
    (no key to name); config-check stops there too, saying why."""
    path = workdir / "cases-unreadable.yaml"
    path.write_text(text)
    code, out, err = config_check(["config-check", path.name])
    assert code == 2 and says in err and path.name in err and "Traceback" not in err, err
    code, out = snakemake(forkserver, workdir, ["-n", "--configfile", path.name])
    assert code != 0 and "WorkflowError" in out and "Traceback" not in out, out[-3000:]
    assert "Building DAG" not in out


@pytest.mark.parametrize("text, says", [
    ("__use_yte__: true\nseed: ?1 // 0\n", "ZeroDivisionError"),
    (None, "does not exist"),
    ("pathvars: 5\n", "config key 'pathvars': unknown key"),    # Snakemake reads `pathvars` itself
])
def test_config_check_names_what_snakemake_reports_with_a_traceback(text, says, workdir, config_check):
    """A YTE template that raises, a missing --configfile, a top-level `pathvars` that is no mapping:
    Snakemake shows a traceback before any workflow code runs (outside this workflow's reach);
    config-check says what is wrong."""
    path = workdir / "cases-template.yaml"
    path.unlink(missing_ok=True)
    if text is not None:
        path.write_text(text)
    code, out, err = config_check(["config-check", path.name])
    assert code == 2 and says in err and "Traceback" not in err, err


# ---------------------------------------------------------------- the same parse and merge as Snakemake


def test_config_args_parse_as_snakemake_parses_them():
    from snakemake.cli import parse_config

    entries = ["seed=7", "seed=nan", "lr=1e-3", "big=inf", "flag=True", "flag_2=false", "name='quoted'",
               "teacher={'steps': 5, 'lr': 0.1}", "lst=[1, 2]", "empty=", "a_b-c=1.5", "words=text with words",
               "null_value=null"]
    for entry in entries:
        ours, theirs = parse_config_args([entry]), parse_config([entry])
        assert json.dumps(ours) == json.dumps(theirs), entry
    assert json.dumps(parse_config_args(entries)) == json.dumps(parse_config(entries))
    for bad in ("noequals", "1x=2", "ab.cd=1", "x=1"):
        with pytest.raises(LoopKVError):
            parse_config_args([bad])
        with pytest.raises(ValueError):
            parse_config([bad])


def test_merge_is_snakemakes():
    from snakemake.utils import update_config as snakemake_update

    base = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1, "g": [1], "h": {"i": 1}}
    overlays = [{"a": {"b": 2, "d": {"x": 3}}, "f": {"now": "a map"}}, {"a": 5, "g": {}, "h": None},
                {"a": {"c": [3]}, "new": {"k": {"l": 1}}}, {}, {"g": {"m": 1}}]
    for overlay in overlays:
        ours, theirs = copy.deepcopy(base), copy.deepcopy(base)
        update_config(ours, copy.deepcopy(overlay))
        snakemake_update(theirs, copy.deepcopy(overlay))
        assert json.dumps(ours) == json.dumps(theirs), overlay


def test_files_parse_as_snakemake_parses_them(tmp_path):
    from snakemake.common.configfile import load_configfile

    files = [*ROOT.glob("config/*.yaml"), *ROOT.glob("tests/workflow/*.yaml"), ROOT / "benchmarks/gpu_smoke.yaml",
             *[p for p in CASES.iterdir() if p.stem not in ("yaml-key-twice", "yaml-section-twice", "json-key-twice")]]
    extra = {"json-numbers.json": '{"a": 1e3, "b": NaN, "c": [1, 2.5, true, null]}',
             "yte.yaml": "__use_yte__: true\na: ?[i for i in range(3)]\n?if True:\n  b: 1\n",
             "yte-off.yaml": "__use_yte__: false\na: ?1\n", "anchors.yaml": "x: &x {a: 1}\ny:\n  <<: *x\n  a: 2\n",
             "bom.yaml": "\ufeffa: 1\n"}
    for name, text in extra.items():
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    for path in files:
        ours, theirs = read_config_file(path), load_configfile(str(path))
        assert repr(ours).replace("OrderedDict", "dict") == repr(_plain(theirs)), path.name


def _plain(node):
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def test_a_key_given_twice_is_named_with_its_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("lm_eval:\n  tasks:\n    - {name: gsm8k, shards: 2, shards: 3}\nseed: 1\n")
    with pytest.raises(LoopKVError, match=r"config key 'lm_eval\.tasks\[0\]\.shards': is given twice \(lines 3 and 3"):
        read_config_file(path)
    path.write_text("x: &x {a: 1}\ny:\n  <<: *x\n  a: 2\n")   # a merge key's values may be overridden
    assert read_config_file(path) == {"x": {"a": 1}, "y": {"a": 2}}
    path.write_text(yaml.safe_dump({"seed": 1}))
    assert read_config_file(path) == {"seed": 1}
