"""The DAG submitted to a real SLURM cluster (one node on localhost, Debian's daemons, slurmdbd so
sacct works) through workflow/profiles/slurm with its own defaults, only the partition names edited
in its partitions.yaml as the README tells users: GPU-less jobs land on the CPU partition and a model
job on the GPU partition with its GPU, each job asks for its rule's threads, a job killed for memory
is retried with twice the memory, and the outputs equal a local run's, byte for byte."""
import subprocess

import pytest
import yaml

from slurm_cluster import GPU_PARTITION, PARTITION, LocalSlurm, ensure_installed
from workflow_helpers import SNAKEMAKE, copy_workflow, snakemake

pytestmark = pytest.mark.slow

TARGETS = ["results/data/tasks/cloze/test.jsonl", "results/data/tasks/arithmetic/test.jsonl",
           "results/teacher/model/model.safetensors"]
OUTPUTS = ["results/data/corpus/train.txt", "results/data/tokenizer/tokenizer.json", *TARGETS]
# the site: GPUs for the model jobs; 300 MB for a data job's first attempt, below what a corpus or
# tokenizer job peaks at under SLURM (the job step's own Snakemake, ~500 MB, plus loopkv: 56 / 99 MB
# measured since `import loopkv` no longer loads torch; ~470-500 MB before), so SLURM kills it and
# each retry asks for base x attempt (the profile allows two)
DATA_MB = 300
SITE = {"launch": {"gpus": 1, "jobs": {"data": {"mem_mb": DATA_MB}}}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = ensure_installed()
    if why:
        pytest.skip(why)
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    if slurm.foreign_config():
        pytest.skip(slurm.foreign_config())
    try:
        yield slurm.start()
    finally:
        slurm.stop()


def _edit_partitions(workdir):
    """What a user does: the profile's partition names set to the site's."""
    path = workdir / "workflow/profiles/slurm/partitions.yaml"
    partitions = yaml.safe_load(path.read_text())["partitions"]
    renamed = {PARTITION: partitions["cpu"], GPU_PARTITION: {**partitions["gpu"], "max_gpu": 2}}
    path.write_text(yaml.safe_dump({"partitions": renamed}))


def test_a_dag_slice_runs_through_slurm_on_the_profiles_defaults(cluster, tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "local").mkdir()
    on_slurm, local = copy_workflow(tmp_path / "slurm"), copy_workflow(tmp_path / "local")
    _edit_partitions(on_slurm)
    for workdir in (on_slurm, local):
        (workdir / "site.yaml").write_text(yaml.safe_dump(SITE))
    before = {j["id"] for j in cluster.accounted_jobs()}
    proc = subprocess.run(
        [*SNAKEMAKE, "--profile", "workflow/profiles/slurm", "--configfile", "micro.yaml", "site.yaml",
         "--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "5", *TARGETS],
        cwd=on_slurm, env=cluster.env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    snakemake(local, *TARGETS, "--configfile", "micro.yaml", "site.yaml")

    jobs = [j for j in cluster.accounted_jobs() if j["id"] not in before]
    by_rule: dict[str, list[dict]] = {}
    for j in jobs:
        by_rule.setdefault(j["comment"].removeprefix("rule_").split("_wildcards_")[0], []).append(j)
    assert set(by_rule) == {"corpus", "tokenizer", "task_data", "teacher_pretrain"}, jobs
    # every job completed in the end; the data jobs' first attempts ran out of memory and each
    # retry asked for more
    for rule, attempts in by_rule.items():
        assert any(j["state"] == "COMPLETED" for j in attempts), (rule, attempts)
    for rule in ("corpus", "tokenizer"):
        states = [j["state"] for j in by_rule[rule]]
        # accounting through jobacct_gather's OverMemoryKill reports the kill as FAILED; its log says why
        assert states[0] in ("OUT_OF_MEMORY", "FAILED") and states[-1] == "COMPLETED", (rule, by_rule[rule])
        first_log = on_slurm / f"logs/slurm/rule_{rule}/{by_rule[rule][0]['id']}.log"
        assert "Exceeded job memory limit" in first_log.read_text(), first_log
        for attempt, job in enumerate(by_rule[rule], 1):
            assert f"mem={DATA_MB * attempt}M" in job["tres"], by_rule[rule]
    # GPU-less jobs on the CPU partition with one CPU (their rules' threads), the model job on the
    # GPU partition with its GPU and teacher.threads CPUs
    for rule in ("corpus", "tokenizer", "task_data"):
        assert {(j["partition"], j["cpus"]) for j in by_rule[rule]} == {(PARTITION, "1")}, by_rule[rule]
        assert "gres/gpu" not in by_rule[rule][0]["tres"]
    teacher = by_rule["teacher_pretrain"]
    assert {(j["partition"], j["cpus"]) for j in teacher} == {(GPU_PARTITION, "2")}, teacher
    assert "gres/gpu=1" in teacher[0]["tres"], teacher
    for path in OUTPUTS:
        assert (on_slurm / path).read_bytes() == (local / path).read_bytes(), path
