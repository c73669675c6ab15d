"""Every command the DAG runs computes on the configured device, with nothing left on another: one
job of each model-computing command runs on the lazy-tensor device (a second device on a CPU-only
machine, where a CPU tensor beside a device tensor fails as it does beside a CUDA tensor) and its
result records that device. Every KV method on that device: tests/test_device_placement.py.

The codec distillations (distill, distill-on-policy) train on the CPU here: the lazy backend's
TorchScript interpreter fails in the backward of their two-pass attention ("expected scalar type
Double but found Float", a backend bug: each op of it passes alone). Their forward, batches and
generation run on the lazy device in tests/train/test_training_on_device.py. MELT's evaluation
(method-eval --student) is left out: served MELT prefills a prompt one token at a time inside one
forward, which the lazy backend records as one graph (killed for memory at 100 tokens); the MELT
cache streams on the lazy device in tests/test_device_placement.py and melt-memory decodes a MELT
model here. The device is a resource, so the DAG moves between devices without rerunning anything."""
import json
import shutil

import pytest

from workflow_helpers import MICRO, copy_workflow, planned_jobs, snakemake

pytestmark = pytest.mark.slow

# command -> a result it writes (teacher-pretrain, calibrate, distill and melt stage 1 run on the way)
WRITTEN_BY = {
    "teacher-pretrain": "teacher/model/train_curve.json",
    "teacher-eval": "teacher/quality.json",
    "calibrate": "calibration/calibration.json",
    "distill": "distill/lla/4x/curve.json",
    "method-eval": "methods/lla/4x/quality.json",
    "distill-on-policy": "on_policy/lla/4x/curve.json",
    "melt-train": "melt/full/stage2/model/train_curve.json",
    "melt-memory": "melt/memory.json",
    "lm-eval-shard": "lm_eval/lla/4x/gsm8k/shard1of2.json",
    "lm-eval-shard (passkey grid)": "lm_eval/lla/4x/passkey_grid/shard0of1.json",
    "serve-bench": "serve/serving.json",
    "kernel-bench": "serve/kernel.json",
}


ON_CPU = {"distill", "distill-on-policy"}


@pytest.fixture(scope="module")
def on_lazy(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("lazy"))
    shutil.copy(MICRO.with_name("lazy_device.yaml"), workdir / "lazy.yaml")
    (workdir / "cpu.yaml").write_text((workdir / "lazy.yaml").read_text().replace("device: lazy", "device: cpu"))
    lazy, cpu = ("--configfile", "micro.yaml", "lazy.yaml"), ("--configfile", "micro.yaml", "cpu.yaml")
    first = [f"results/{WRITTEN_BY[c]}" for c in ("teacher-pretrain", "teacher-eval", "calibrate")]
    snakemake(workdir, *lazy, "--", *first)
    # every codec the lazy jobs read (lla at 2x: MELT's budget here, for melt-memory)
    snakemake(workdir, *cpu, "--", *(f"results/{WRITTEN_BY[c]}" for c in ON_CPU), "results/distill/lla/2x/codec.pt")
    snakemake(workdir, *lazy, "--", *(f"results/{p}" for p in WRITTEN_BY.values()))
    return workdir


def test_every_model_command_ran_on_the_lazy_device(on_lazy):
    devices = {name: json.loads((on_lazy / "results" / path).read_text())["provenance"]["device"]
               for name, path in WRITTEN_BY.items()}
    assert devices == {name: "cpu" if name in ON_CPU else "lazy" for name in WRITTEN_BY}


def test_the_device_is_a_resource_not_a_result_key(on_lazy):
    # like the ranks: the same jobs planned for the CPU rerun nothing
    targets = [f"results/{p}" for p in WRITTEN_BY.values()]
    assert planned_jobs(on_lazy, "--configfile", "micro.yaml", "cpu.yaml", "--", *targets) == {}
