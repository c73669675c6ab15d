"""The workflow's DeepSpeed training jobs on 2 ranks (config `launch.ranks`, torchrun, gloo on CPU):
changing the rank count reruns nothing; a forced rerun trains on 2 ranks, writes its outputs once,
and distils the same codec as the 1-rank run to float32 round-off (rtol 1e-5)."""
import json
import shutil

import pytest
import torch
import yaml

from workflow_helpers import planned_jobs, snakemake

pytestmark = pytest.mark.slow

CODEC = "results/distill/lla/4x/codec.pt"


def test_two_rank_distillation_matches_one_rank(finished, tmp_path):
    work = tmp_path / "ranks"
    shutil.copytree(finished, work, symlinks=True)
    micro = yaml.safe_load((work / "micro.yaml").read_text())
    micro["launch"] = {"ranks": 2}
    (work / "ranks.yaml").write_text(yaml.safe_dump(micro))
    assert planned_jobs(work, "--configfile", "ranks.yaml") == {}     # ranks change no result

    snakemake(work, CODEC, "--force", "--configfile", "ranks.yaml")
    curve = json.loads((work / "results/distill/lla/4x/curve.json").read_text())
    assert curve["ranks"] == 2
    assert list((work / "results/distill/lla/4x/checkpoints").glob("*/world2/latest"))
    one = torch.load(finished / CODEC, weights_only=False)["codec_state"]
    two = torch.load(work / CODEC, weights_only=False)["codec_state"]
    assert one.keys() == two.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-6)
    ref = json.loads((finished / "results/distill/lla/4x/curve.json").read_text())
    torch.testing.assert_close(torch.tensor([r["loss"] for r in curve["curve"]["train"]]),
                               torch.tensor([r["loss"] for r in ref["curve"]["train"]]), rtol=1e-5, atol=1e-7)
    assert not list(work.glob("results/distill/**/*.tmp"))
