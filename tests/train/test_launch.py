"""`--ranks`: a training command relaunches itself under torchrun only when asked to and not yet launched."""
import pytest

from loopkv.errors import LoopKVError
from loopkv.train.launch import is_main_process, relaunch_on_ranks, torchrun_command, world_size


def test_one_rank_trains_in_this_process(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert relaunch_on_ranks(1, ["distill"]) is None


def test_a_launched_rank_does_not_relaunch(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert relaunch_on_ranks(4, ["distill"]) is None


def test_a_launcher_with_another_world_size_is_an_error(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(LoopKVError, match="WORLD_SIZE"):
        relaunch_on_ranks(4, ["distill"])


def test_zero_ranks_is_an_error(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(LoopKVError, match="--ranks"):
        relaunch_on_ranks(0, ["distill"])


def test_torchrun_runs_the_same_command_line_as_a_module():
    cmd = torchrun_command(8, ["distill", "--ranks", "8", "--out", "x.pt"])
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert "--nproc-per-node=8" in cmd
    assert cmd[-6:] == ["-m", "loopkv", "distill", "--ranks", "8", "--out", "x.pt"][-6:]


def test_without_a_process_group_this_process_is_the_writer():
    assert is_main_process() and world_size() == 1
