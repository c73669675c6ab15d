"""The same codec distillation with 2 DeepSpeed ranks (gloo, each rank half of every batch) and with
1: the curves and the distilled codec agree to float32 round-off (tolerance 1e-5 relative)."""
import os
import socket
import tempfile

import pytest
import torch
import torch.multiprocessing as mp

pytestmark = pytest.mark.slow


def _distill(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    import test_distill as td
    from loopkv.analysis.calibration import Calibration, capture_kv
    from loopkv.models import OuroConfig, OuroForCausalLM

    config = OuroConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2, total_ut_steps=2,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=0.2)
    torch.manual_seed(0)
    teacher = OuroForCausalLM(config).eval()
    torch.manual_seed(1)
    calibration = Calibration(("per_head", "per_loop"))
    k, v = capture_kv(teacher, torch.randint(3, 61, (8, 16)))
    calibration.add(k.flatten(0, 1), v.flatten(0, 1))
    view = td.view_of(teacher, calibration, td.lla(2, 3))
    result = td.distill_codec(td.CFG, teacher, view, td.batches, td.VAL, tempfile.mkdtemp(), progress=False)
    assert torch.distributed.get_world_size() == world and torch.distributed.get_rank() == rank
    if rank == 0:
        torch.save(result, out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world: int, tmp_path) -> dict:
    out = str(tmp_path / f"world{world}.pt")
    mp.spawn(_distill, args=(world, _free_port(), out), nprocs=world, join=True)
    return torch.load(out, weights_only=False)


def test_two_ranks_match_one(tmp_path):
    one, two = run(1, tmp_path), run(2, tmp_path)
    for key in ("train", "heldout"):
        a = [row.get("loss", row.get("kl")) for row in one["curve"][key]]
        b = [row.get("loss", row.get("kl")) for row in two["curve"][key]]
        torch.testing.assert_close(torch.tensor(b), torch.tensor(a), rtol=1e-5, atol=1e-7)
    for name, value in one["codec_state"].items():
        torch.testing.assert_close(two["codec_state"][name], value, rtol=1e-5, atol=1e-6)
    assert len(one["curve"]["train"]) == len(two["curve"]["train"]) == 6
