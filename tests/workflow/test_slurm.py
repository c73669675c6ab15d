"""The DAG submitted to a real SLURM cluster (one node on localhost, Debian's daemons, slurmdbd so
sacct works) through workflow/profiles/slurm: the jobs go through SLURM and their outputs equal a
local run's, byte for byte."""
import subprocess

import pytest

from slurm_cluster import ACCOUNT, PARTITION, LocalSlurm, ensure_installed
from workflow_helpers import SNAKEMAKE, copy_workflow, snakemake

pytestmark = pytest.mark.slow

TARGETS = ["results/data/tasks/cloze/test.jsonl", "results/data/tasks/arithmetic/test.jsonl"]
OUTPUTS = ["results/data/corpus/train.txt", "results/data/tokenizer/tokenizer.json", *TARGETS]


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


def test_a_dag_slice_runs_through_slurm_and_equals_a_local_run(cluster, tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "local").mkdir()
    on_slurm, local = copy_workflow(tmp_path / "slurm"), copy_workflow(tmp_path / "local")
    before = {j["id"] for j in cluster.accounted_jobs()}
    proc = subprocess.run(
        [*SNAKEMAKE, "--profile", "workflow/profiles/slurm", "--configfile", "micro.yaml",
         # the site's partition and account, overridden for this cluster
         "--default-resources", f"slurm_partition={PARTITION}", f"slurm_account={ACCOUNT}",
         "--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "5", *TARGETS],
        cwd=on_slurm, env=cluster.env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    snakemake(local, *TARGETS, "--configfile", "micro.yaml")

    jobs = [j for j in cluster.accounted_jobs() if j["id"] not in before]
    # corpus, tokenizer and the two task sets: four jobs, all completed on the overridden partition
    assert len(jobs) == 4, jobs
    assert {j["state"] for j in jobs} == {"COMPLETED"} and {j["partition"] for j in jobs} == {PARTITION}
    for path in OUTPUTS:
        assert (on_slurm / path).read_bytes() == (local / path).read_bytes(), path
