"""Run a training command on several ranks of one node: the command re-executes itself under torchrun.

Rules call `loopkv distill ... --ranks N`. With N > 1, and only when no launcher started this
process (no RANK in the environment), the process is replaced by `torchrun --standalone` with N
copies of the same command line; each copy joins the process group in `init_distributed` (nccl on
GPUs, gloo on CPU). --standalone picks a free rendezvous port, so jobs sharing a node do not clash.
"""
from __future__ import annotations

import os
import sys

from loopkv.errors import LoopKVError


def torchrun_command(ranks: int, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            f"--nproc-per-node={ranks}", "-m", "loopkv", *argv]


def relaunch_on_ranks(ranks: int, argv: list[str]) -> None:
    """Return when this process should train (one rank, or already launched); otherwise exec torchrun."""
    if ranks < 1:
        raise LoopKVError(f"--ranks must be >= 1, got {ranks}")
    if "RANK" in os.environ:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world != ranks:
            raise LoopKVError(f"--ranks {ranks} but the launcher started {world} ranks (WORLD_SIZE)")
        return
    if ranks == 1:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    command = torchrun_command(ranks, argv)
    os.execv(command[0], command)


def is_main_process() -> bool:
    """Rank 0 (or no process group): the one process that writes a command's outputs."""
    import torch

    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def world_size() -> int:
    """Ranks that trained (recorded beside each training curve)."""
    import torch

    return torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
