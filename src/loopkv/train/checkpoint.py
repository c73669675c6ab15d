"""Resumable training state: one file, written atomically, so a kill at any moment leaves either
the previous checkpoint or the new one, never a torn file."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from loopkv.utils.atomic import atomic_path
from loopkv.utils.checked_io import load_pt
from loopkv.utils.device import to_host

CHECKPOINT_NAME = "last.pt"


def save_checkpoint(directory: str | os.PathLike, state: dict) -> Path:
    path = Path(directory) / CHECKPOINT_NAME
    with atomic_path(path) as tmp:
        torch.save(to_host(state), tmp)   # host tensors: a checkpoint resumes on any device
    return path


def load_checkpoint(directory: str | os.PathLike, fields: dict | None = None) -> dict | None:
    """The last checkpoint in `directory`, or None when there is none. `fields`: the payload's
    expected fields and types (utils/checked_io.check_fields); a truncated, corrupt or foreign file
    raises LoopKVError naming it."""
    path = Path(directory) / CHECKPOINT_NAME
    if not path.exists():
        return None
    return load_pt(path, "training checkpoint", fields if fields is not None else {},
                   hint="; delete it to restart training from scratch")
