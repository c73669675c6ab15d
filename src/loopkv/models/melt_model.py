"""A MELT model initialised from a looped teacher (MELT paper, Section 4: post-training from Ouro).

Every teacher weight is copied; the only new parameters are the gates (zero-initialised, so the
gated variants start at z = 1/2). The config records the gate variant and the chunk size the model
is trained and served with, so a saved MELT model is self-describing.
"""
from __future__ import annotations

import copy

import torch

from loopkv.models.melt_gate import MeltGate
from loopkv.models.modeling_ouro import OuroForCausalLM
from loopkv.utils.device import model_device, place, to_host


def melt_from_teacher(teacher, gate: str, ema_decay: float = 0.5, chunk_size: int | None = None):
    from loopkv.cache.melt import MeltCache

    MeltCache.check_serves(teacher.config)   # a Huginn teacher: refused, saying why, before anything is built
    config = copy.deepcopy(teacher.config)
    # a real Ouro teacher's auto_map names remote-code files a student's directory does not have:
    # tools that load with trust_remote_code would fail on it (loopkv registers "ouro" itself)
    config.__dict__.pop("auto_map", None)
    config.melt_gate, config.melt_ema_decay, config.melt_chunk_size = gate, ema_decay, chunk_size
    config.kv_method = "melt"
    config.validate_architecture()
    device = model_device(teacher)
    # built where the teacher lives (a GPU at 1.4B); the lazy device cannot build modules in place
    with torch.device(device if device.type != "lazy" else "cpu"):
        student = place(OuroForCausalLM(config).to(teacher.dtype), device)
    missing, unexpected = student.load_state_dict(teacher.state_dict(), strict=False)
    if unexpected or any(".melt_gate." not in name for name in missing):
        raise ValueError(f"teacher and MELT student differ beyond the gates: missing {missing}, "
                         f"unexpected {unexpected}")
    with torch.no_grad():
        for module in student.modules():
            if isinstance(module, MeltGate):
                module.reset_parameters()
    return student.train().requires_grad_(True)


def save_melt(student, directory, tokenizer=None) -> None:
    """Save a MELT model for serving, which is sequential (chunk size 1): every token, prompt or
    generated, reads its predecessors' final rows, the recurrence chunk-wise training approximates,
    and a result that does not depend on how prompts are batched or padded. The chunk size it was
    trained with is kept as melt_train_chunk_size."""
    config = student.config
    trained_with = config.melt_chunk_size
    config.melt_train_chunk_size, config.melt_chunk_size = trained_with, 1
    try:
        student.save_pretrained(directory, state_dict=to_host(student.state_dict()))
    finally:
        config.melt_chunk_size = trained_with
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)


def load_melt(directory, dtype: str = "float32", train_chunk_size: int | None = 1, device="cpu"):
    """A saved MELT model on `device`; `train_chunk_size` sets the chunking of its forward (1 = as served)."""
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher

    model = load_teacher(directory, dtype, device)
    if model.config.melt_gate is None:
        raise LoopKVError(f"{directory} is not a MELT model (config.melt_gate is unset)")
    model.config.melt_chunk_size = train_chunk_size
    return model
