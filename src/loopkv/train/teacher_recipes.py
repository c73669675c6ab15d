"""How a looped family's tiny teacher is built and trained from scratch (train/pretrain.py runs the
same loop for every family): `model.arch` (loopkv's shape names: D looped layers, T loops or steps)
gives the family's config; a recipe says how one batch's loss is computed and what the held-out
measurement is. `arch["family"]` selects it (jobs/views.py puts it there; absent: Ouro)."""
from __future__ import annotations

from typing import Protocol

import torch

from loopkv.errors import LoopKVError


class TeacherRecipe(Protocol):
    family: str
    progress_key: str   # the diagnostic the progress bar shows

    def model(self, arch: dict, tokenizer, dtype: str) -> torch.nn.Module:
        """A freshly initialised model of the family (on the CPU)."""

    def decays(self, name: str, p: torch.nn.Parameter) -> bool:
        """Whether AdamW's weight decay applies to this parameter."""

    def loss(self, model, rows: torch.Tensor, step: int, cfg: dict, seed: int) -> tuple[torch.Tensor, dict]:
        """(scalar loss, float diagnostics for the curve) of training rows (B, L+1) at `step`; cfg is
        the run's `teacher` section, seed the run's."""

    def heldout(self, model, windows: torch.Tensor, batch_size: int) -> dict:
        """The held-out measurement (eval mode, no grad; back to train mode after)."""


def teacher_recipe(arch: dict) -> TeacherRecipe:
    from loopkv.train.teacher_huginn import HuginnRecipe
    from loopkv.train.teacher_ouro import OuroRecipe

    recipes = {r.family: r for r in (OuroRecipe(), HuginnRecipe())}
    family = arch.get("family", "ouro")
    if family not in recipes:
        raise LoopKVError(f"model.family {family!r}: no teacher recipe (known: {', '.join(sorted(recipes))})")
    return recipes[family]


def token_ids(tokenizer) -> dict:
    """The special-token ids every family's config records."""
    return {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id}
