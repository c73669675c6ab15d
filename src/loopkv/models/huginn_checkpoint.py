"""Checks of a Huginn checkpoint that transformers' loading does not make, with errors naming the
config field: the vocabulary rows of the weights against `padded_vocab_size`, and the stored RoPE
table (`freqs_cis`) against the one `rope_base` gives, which our attention computes instead of reading."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import safetensors_shapes

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
VOCAB_TENSORS = ("transformer.wte.weight", "lm_head.weight")   # rows = padded_vocab_size
ROPE_TOLERANCE = 1e-4   # a different rope_base or block layout is off by far more


def rope_table(config) -> torch.Tensor:
    """(1, block_size, 1, head_dim / 2, 2): (cos, sin) of position p at frequency i, theta^(-2i/d),
    computed in float32 as the reference computes its freqs_cis."""
    d = config.head_dim
    inv_freq = 1.0 / (float(config.rope_base) ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.outer(torch.arange(config.block_size, dtype=torch.float32), inv_freq)
    return torch.stack([angles.cos(), angles.sin()], dim=-1)[None, :, None]


def check_rope_table(model) -> None:
    want = rope_table(model.config).to(model.freqs_cis.device)
    got = model.freqs_cis.float()
    if got.shape != want.shape or not torch.allclose(got, want, atol=ROPE_TOLERANCE, rtol=0):
        diff = (got - want).abs().max().item() if got.shape == want.shape else f"shape {tuple(got.shape)}"
        raise LoopKVError(f"Huginn checkpoint: its freqs_cis (the stored RoPE table) is not the one rope_base "
                          f"{model.config.rope_base} and block_size {model.config.block_size} give (max |diff| "
                          f"{diff}, want {tuple(want.shape)}); the checkpoint's RoPE differs from the config's")


def check_vocab_rows(directory, config=None) -> None:
    """The rows of the embedding (and of an untied head) in a local checkpoint's weight files must be
    its config's padded_vocab_size; a remote name is left to transformers' own shape check."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    padded = getattr(config, "padded_vocab_size", None)   # a config passed to from_pretrained, else its file's
    if padded is None:
        if not (directory / "config.json").is_file():
            return
        fields = json.loads((directory / "config.json").read_text())
        padded = fields.get("padded_vocab_size") or fields.get("vocab_size")
    for name, rows in _rows(directory).items():
        if rows != padded:
            raise LoopKVError(f"Huginn checkpoint {directory}: {name} has {rows} rows but the config's "
                              f"padded_vocab_size is {padded} (wrong vocabulary padding: the weights were "
                              "padded to another size than the config says)")


def _rows(directory: Path) -> dict[str, int]:
    """Rows of the vocabulary tensors the weight files hold (their headers only)."""
    if (directory / SAFETENSORS).is_file():
        files = {name: SAFETENSORS for name in VOCAB_TENSORS}
    elif (directory / SAFETENSORS_INDEX).is_file():
        weight_map = json.loads((directory / SAFETENSORS_INDEX).read_text()).get("weight_map", {})
        files = {name: weight_map[name] for name in VOCAB_TENSORS if name in weight_map}
    else:
        return {}
    shapes: dict[str, dict] = {}
    rows = {}
    for name, file in files.items():
        if file not in shapes:
            shapes[file] = safetensors_shapes(directory / file) if (directory / file).is_file() else {}
        if name in shapes[file]:
            rows[name] = shapes[file][name][0]
    return rows
