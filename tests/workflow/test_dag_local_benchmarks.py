"""A benchmark read from a file you give (issue 22): the config names it (data.local_benchmarks), its
data job (rule local_bench_data: bench_data's command and outputs, the file its input) takes the file
as an input, so editing the file reruns the job, and a listed task without its file, or a malformed
file, stops the run before any job."""
import json
import time

import yaml

from loopkv.config import load_config
from workflow_helpers import planned_jobs, snakemake

ROWS = [{"id": "2024-I-1", "problem": "Find $1 + 1$.", "answer": 2}, {"id": "2024-I-2", "problem": "Find 3.", "answer": "3"}]


def _config(workdir, with_file=True, rows=ROWS):
    (workdir / "aime24.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = [*load_config({}, check_paths=False)["lm_eval"]["tasks"], {"name": "aime24", "shards": 2, "max_gen_toks": 32}]
    cfg = {"lm_eval": {"tasks": tasks}}
    if with_file:
        cfg["data"] = {"local_benchmarks": {"aime24": "aime24.jsonl"}}
    (workdir / "local.yaml").write_text(yaml.safe_dump(cfg))
    return ("--configfile", "local.yaml")


def test_a_local_benchmark_plans_its_data_job_with_the_file_as_input(workdir):
    args = _config(workdir)
    target = "results/lm_eval/full/1x/aime24.json"
    jobs = planned_jobs(workdir, *args, "--", target)
    assert (jobs["local_bench_data"], jobs["lm_eval_shard"], jobs["lm_eval_merge"]) == (1, 2, 1)
    out = snakemake(workdir, "-n", "-p", *args, "--", "results/data/bench/aime24/test.jsonl").stdout
    assert "rule local_bench_data:" in out and "input: aime24.jsonl" in out
    assert "loopkv data-bench aime24 --source aime24.jsonl --out results/data/bench/aime24" in out
    # Table 7 reads it beside the default tasks
    assert "results/lm_eval/full/1x/aime24.json" in snakemake(workdir, "-n", *args, "--", "reports/table7.pdf").stdout


def test_editing_the_file_reruns_its_data_job(workdir):
    args = _config(workdir)
    snakemake(workdir, *args, "--", "results/data/bench/aime24/test.jsonl")
    rows = (workdir / "results/data/bench/aime24/test.jsonl").read_text().splitlines()
    assert [json.loads(r)["answer"] for r in rows] == ["2", "3"]
    assert "local_bench_data" not in planned_jobs(workdir, *args, "--", "results/data/bench/aime24/test.jsonl")
    time.sleep(1.1)   # a newer modification time
    (workdir / "aime24.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    assert planned_jobs(workdir, *args, "--", "results/data/bench/aime24/test.jsonl") == {"local_bench_data": 1}


def test_a_listed_task_without_its_file_or_with_a_bad_one_stops_before_any_job(workdir):
    proc = snakemake(workdir, "-n", *_config(workdir, with_file=False), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and not (workdir / "results").exists()
    listed = len(load_config({}, check_paths=False)["lm_eval"]["tasks"])    # aime24's entry comes after the default's
    assert f"config key 'lm_eval.tasks[{listed}].name': task 'aime24' reads a file you give" in out
    assert "data.local_benchmarks.aime24 is not set" in out
    proc = snakemake(workdir, "-n", *_config(workdir, rows=[ROWS[0], {"problem": "no answer"}]), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and not (workdir / "results").exists()
    assert "config key 'data.local_benchmarks.aime24'" in out and "aime24.jsonl line 2: field 'answer' is missing" in out


def test_bbh_reads_the_sdist_its_key_names_as_its_data_jobs_input(workdir, monkeypatch):
    """bbh / bbh_gen read BIG-bench's sdist (data.bigbench_sdist) through the same rule: the file is the
    data job's input; without it (PyPI no longer serves it) the run stops before any job, naming the entry."""
    from loopkv.data import bigbench

    tasks = [{"name": "gsm8k", "max_docs": 4}, {"name": "bbh_gen", "max_docs_per_group": 2, "shots": 3}]
    (workdir / "bbh.yaml").write_text(yaml.safe_dump({"lm_eval": {"tasks": tasks},
                                                      "data": {"bigbench_sdist": "downloads/bigbench-1.0.0.tar.gz"}}))
    out = snakemake(workdir, "-n", "-p", "--configfile", "bbh.yaml", "--", "results/data/bench/bbh_gen/test.jsonl").stdout
    assert "rule local_bench_data:" in out and "input: downloads/bigbench-1.0.0.tar.gz" in out
    assert "loopkv data-bench bbh_gen --source downloads/bigbench-1.0.0.tar.gz --out results/data/bench/bbh_gen" in out
    # null: the environment's copy, which this environment may lack (PyPI withdrew it): refused by name if absent
    (workdir / "bbh.yaml").write_text(yaml.safe_dump({"lm_eval": {"tasks": tasks}}))
    proc = snakemake(workdir, "-n", "--configfile", "bbh.yaml", check=False)
    if bigbench.sdist_path().is_file():
        assert proc.returncode == 0, proc.stdout[-2000:]
    else:
        assert proc.returncode != 0 and not (workdir / "results").exists()
        assert ("config key 'lm_eval.tasks[1].name': task 'bbh_gen' reads BBH's source tasks from PyPI bigbench "
                "1.0.0's sdist") in proc.stdout + proc.stderr
    (workdir / "bbh.yaml").write_text(yaml.safe_dump({"lm_eval": {"tasks": tasks}, "data": {"bigbench_sdist": "gone.tar.gz"}}))
    proc = snakemake(workdir, "-n", "--configfile", "bbh.yaml", check=False)
    assert proc.returncode != 0 and "config key 'data.bigbench_sdist': BIG-bench sdist" in proc.stdout + proc.stderr
