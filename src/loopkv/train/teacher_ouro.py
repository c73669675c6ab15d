"""Ouro's tiny teacher: T loops of D shared layers with an exit gate, trained on the expected loss
over the exit distribution minus an entropy bonus (train/objectives.py)."""
from __future__ import annotations

import torch

from loopkv.eval.heldout import family_heldout
from loopkv.train.objectives import ouro_loss
from loopkv.train.teacher_recipes import token_ids


class OuroRecipe:
    family = "ouro"
    progress_key = "expected_ce"

    def model(self, arch: dict, tokenizer, dtype: str):
        from loopkv.models import OuroConfig, OuroForCausalLM

        shape = {k: v for k, v in arch.items() if k != "family"}
        config = OuroConfig(vocab_size=len(tokenizer), num_key_value_heads=arch["num_attention_heads"],
                            dtype=dtype, **token_ids(tokenizer), **shape)
        return OuroForCausalLM(config)

    def decays(self, name: str, p) -> bool:
        # no weight decay on norms, biases and the gate, as usual for transformers
        return p.ndim >= 2 and "early_exit_gate" not in name

    def loss(self, model, rows: torch.Tensor, step: int, cfg: dict, seed: int):
        out = model(rows[:, :-1], output_loop_logits=True, use_cache=False)
        terms = ouro_loss(out.loop_logits, out.exit_pdf, rows[:, 1:], cfg["entropy_beta"], cfg["exit_prior"])
        return terms["loss"], {"expected_ce": float(terms["expected_ce"]),
                               "final_loop_ce": float(terms["per_loop_ce"][-1]), "entropy": float(terms["entropy"]),
                               "mean_exit_pdf": terms["mean_exit_pdf"].tolist()}

    def heldout(self, model, windows: torch.Tensor, batch_size: int) -> dict:
        return family_heldout(model, windows, batch_size)
