"""Resumable training state: one file, written atomically, so a kill at any moment leaves either
the previous checkpoint or the new one, never a torn file."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from loopkv.errors import LoopKVError
from loopkv.utils.atomic import atomic_path
from loopkv.utils.device import to_host

CHECKPOINT_NAME = "last.pt"


def save_checkpoint(directory: str | os.PathLike, state: dict) -> Path:
    path = Path(directory) / CHECKPOINT_NAME
    with atomic_path(path) as tmp:
        torch.save(to_host(state), tmp)   # host tensors: a checkpoint resumes on any device
    return path


def load_checkpoint(directory: str | os.PathLike) -> dict | None:
    """The last checkpoint in `directory`, or None when there is none."""
    path = Path(directory) / CHECKPOINT_NAME
    if not path.exists():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises many types for truncated/corrupt files
        raise LoopKVError(
            f"checkpoint {path} is corrupt or truncated ({type(e).__name__}: {e}); "
            "delete it to restart training from scratch"
        ) from e
