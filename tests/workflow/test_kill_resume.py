"""Kills: a training job killed with SIGKILL at a random checkpoint resumes from it: the state the new
process restores is bit for bit the state the killed one saved and the state an uninterrupted run had
at that step (fingerprints of weights and optimizer state), and the final codec equals the
uninterrupted run's, bit for bit, as do its training and held-out curves.

This held only once MKL's reproducibility mode was set (utils/numerics.py): without it, 2-5% of
fresh processes computed the resumed step's loss differently at float round-off (issue 6's notes)."""
import json
import os
import random
import shutil
import signal
import subprocess
import time

import psutil
import pytest
import torch
import yaml

from workflow_helpers import SNAKEMAKE, snakemake

pytestmark = pytest.mark.slow

CODEC = "results/distill/lla/4x/codec.pt"


def _clone(finished, dest):
    shutil.copytree(finished, dest, symlinks=True)
    return dest


def _edit(workdir, change) -> None:
    micro = yaml.safe_load((workdir / "micro.yaml").read_text())
    change(micro)
    (workdir / "edited.yaml").write_text(yaml.safe_dump(micro))


def _start(workdir, *targets):
    return subprocess.Popen([*SNAKEMAKE, "--cores", "2", "--rerun-incomplete", *targets, "--configfile", "edited.yaml"],
                            cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _longer_distillation(micro):
    micro["distill"].update(steps=30, checkpoint_every=1, eval_every=5)


def _checkpoint_steps(workdir, old=frozenset()) -> int:
    """The latest checkpointed step of the run(s) whose checkpoint folders are not in `old`."""
    root = workdir / "results/distill/lla/4x/checkpoints"
    tags = [p.read_text().strip() for p in root.glob("*/world*/latest") if p.parent.parent.name not in old]
    return max((int(t.removeprefix("step")) for t in tags if t.startswith("step")), default=0)


def test_a_training_job_killed_at_a_random_checkpoint_resumes_to_the_same_codec(finished, tmp_path):
    whole = _clone(finished, tmp_path / "whole")
    _edit(whole, _longer_distillation)
    snakemake(whole, CODEC, "--configfile", "edited.yaml")

    cut = _clone(finished, tmp_path / "cut")
    _edit(cut, _longer_distillation)
    kill_after = int(os.environ.get("KILL_AT", 0)) or random.randint(1, 20)
    old = frozenset(p.name for p in (cut / "results/distill/lla/4x/checkpoints").iterdir())   # the first run's
    proc = _start(cut, CODEC)
    try:
        deadline = time.time() + 600
        while _checkpoint_steps(cut, old) < kill_after:
            assert proc.poll() is None and time.time() < deadline, "the job ended before it could be killed"
            time.sleep(0.2)
        # kill -9 the training process itself (Snakemake's job), not Snakemake
        trainers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                    if "distill" in " ".join(p.cmdline()) and "loopkv" in " ".join(p.cmdline())]
        assert trainers, "no running distill process found"
        for p in trainers:
            p.send_signal(signal.SIGKILL)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0                    # its job died: Snakemake failed and kept no output of it
    resumed_from = _checkpoint_steps(cut, old)
    assert kill_after <= resumed_from < 30
    snakemake(cut, CODEC, "--rerun-incomplete", "--configfile", "edited.yaml")
    a = torch.load(whole / CODEC, weights_only=False)
    b = torch.load(cut / CODEC, weights_only=False)
    assert a["codec_state"].keys() == b["codec_state"].keys()
    curve_a = json.loads((whole / "results/distill/lla/4x/curve.json").read_text())["curve"]
    curve_b = json.loads((cut / "results/distill/lla/4x/curve.json").read_text())["curve"]
    where = f"killed after step {kill_after}, resumed from {resumed_from}"
    # restored == what the killed process saved == what the uninterrupted run had at that step
    assert [r["step"] for r in curve_b["resumes"]] == [resumed_from], where
    assert curve_b["resumes"][0]["matches_saved"], where
    live = {r["step"]: r["fingerprint"] for r in curve_a["train"] if "fingerprint" in r}
    assert curve_b["resumes"][0]["fingerprint"] == live[resumed_from], where
    losses_a = [r["loss"] for r in curve_a["train"]]
    losses_b = [r["loss"] for r in curve_b["train"]]
    assert losses_a == losses_b, where
    assert curve_a["heldout"] == curve_b["heldout"], where
    for key in a["codec_state"]:
        assert torch.equal(a["codec_state"][key], b["codec_state"][key]), (key, where)
