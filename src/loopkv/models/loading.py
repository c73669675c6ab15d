"""Load a teacher checkpoint (ours or a real Ouro one) with errors a user can act on."""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from loopkv.errors import LoopKVError
from loopkv.utils.device import place


def load_teacher(directory: str | Path, dtype: str = "float32", device: str | torch.device = "cpu"):
    """Model in eval mode, weights frozen, on `device` (utils/device.py). A missing, truncated or foreign checkpoint raises
    LoopKVError naming the directory instead of a traceback from deep inside torch."""
    directory = Path(directory)
    if not (directory / "config.json").exists():
        raise LoopKVError(f"teacher checkpoint {directory}: no config.json (not a Hugging Face model directory)")
    if not any(directory.glob("*.safetensors")) and not any(directory.glob("*.bin")):
        raise LoopKVError(f"teacher checkpoint {directory}: no weight files (*.safetensors)")
    import loopkv.models  # noqa: F401  (registers "ouro")

    try:
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=getattr(torch, dtype))
    except Exception as e:
        raise LoopKVError(
            f"teacher checkpoint {directory} could not be loaded ({type(e).__name__}: {e}); "
            "it may be truncated or corrupt: re-run the teacher stage or re-download it"
        ) from e
    if getattr(model.config, "model_type", None) != "ouro":
        raise LoopKVError(f"teacher checkpoint {directory}: model_type {model.config.model_type!r}, expected 'ouro'")
    model.eval().requires_grad_(False)
    return place(model, device)
