"""Huginn's tiny teacher: a prelude, a core of D layers run a sampled number of steps from a random
initial state with gradient through the last few only (models/huginn_depth.py), a coda; the loss is
the final output's next-token cross-entropy, as the Huginn paper trains. Held out: the CE at each
test-time step count of `eval_steps` (1, 2, 4, ... 2T), Huginn's signature curve."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from loopkv.eval.heldout import family_heldout
from loopkv.models.huginn_depth import sample_depth
from loopkv.train.teacher_recipes import token_ids
from loopkv.utils.seeding import derive_seed


class HuginnRecipe:
    family = "huginn"
    progress_key = "ce"

    def model(self, arch: dict, tokenizer, dtype: str):
        from loopkv.models import HuginnConfig, HuginnForCausalLM

        P, D, C = arch["prelude_layers"], arch["num_hidden_layers"], arch["coda_layers"]
        vocab = len(tokenizer)
        config = HuginnConfig(
            vocab_size=vocab, padded_vocab_size=vocab, padding_multiple=1, n_embd=arch["hidden_size"],
            n_heads=arch["num_attention_heads"], num_key_value_heads=arch["num_attention_heads"],
            head_dim=arch["head_dim"], n_layers=P + D + C, n_layers_in_prelude=P, n_layers_in_recurrent_block=D,
            n_layers_in_coda=C, intermediate_size=arch["intermediate_size"],
            block_size=arch["max_position_embeddings"], rope_base=arch["rope_theta"], norm_eps=arch["rms_norm_eps"],
            mean_recurrence=arch["total_ut_steps"], mean_backprop_depth=arch["backprop_steps"],
            tie_embeddings=True, dtype=dtype, **token_ids(tokenizer))
        return HuginnForCausalLM(config)

    def decays(self, name: str, p) -> bool:
        # no weight decay on norms and the q/k biases
        return p.ndim >= 2 and not name.endswith("qk_bias")

    def loss(self, model, rows: torch.Tensor, step: int, cfg: dict, seed: int):
        # the step's depth is a function of the step (resume draws the same); the initial state is the
        # forward's own random draw, from the run's restored random stream
        generator = torch.Generator().manual_seed(derive_seed(seed, "huginn-depth", str(step)))
        no_grad, with_grad = sample_depth(model.config.mean_recurrence, model.config.mean_backprop_depth, generator)
        logits = model(rows[:, :-1], num_steps=(no_grad, with_grad), use_cache=False).logits
        ce = F.cross_entropy(logits.flatten(0, 1).float(), rows[:, 1:].flatten(), ignore_index=-100)
        return ce, {"ce": float(ce.detach()), "steps": no_grad + with_grad, "grad_steps": with_grad}

    def heldout(self, model, windows: torch.Tensor, batch_size: int) -> dict:
        return family_heldout(model, windows, batch_size)
