"""`melt`: MELT's constant-size cache (MELT paper, Section 3). Each token owns ONE K/V row per layer,
projected from its gated cross-loop state (models/melt_gate.py): the row is written at loop 0 and
overwritten in place at every later loop, never appended, so the cache does not grow with T.
A token reads earlier forwards' tokens through their final rows and the tokens of its own forward
(chunk) through their rows at the current loop.

Bytes per token = 2 * D * H_kv * d_head * bytes(dtype), whatever T is.

Stage-1 training interpolates towards the LoopLM (KV = alpha * KV_MELT + (1 - alpha) * KV_base):
with alpha < 1 the cache also keeps the teacher's per-loop K/V (projected from each loop's own
input) and every read mixes the two, so alpha = 0 is exactly the LoopLM and alpha = 1 exactly MELT.
Only a MELT model (config.melt_gate set) reads through this cache, via `attend_melt`.
"""
from __future__ import annotations

import torch

from loopkv.cache.base import LoopCache, attention, concat
from loopkv.cache.budget import one_row_setting
from loopkv.cache.full import FullLoopCache


class MeltCache(LoopCache):
    name = "melt"
    label = "MELT"
    token_stores = {"keys": 2, "values": 2}
    budgeted = False   # its budget is fixed by its architecture (T x below the teacher)
    model_variant = True   # served by a MELT model (its own gates, trained in two stages), not the teacher
    bookkeeping = LoopCache.bookkeeping + ("outputs",)   # attention outputs recorded for stage-2 alignment
    outer_layers_refused = ("MELT's student is a gated Ouro (models/melt_model.py); a Huginn MELT, gating across "
                            "recurrence steps between prelude and coda, is not built")
    not_checked = {
        "lossless": "a model variant: its K/V are projected from MELT's gated state, not the teacher's (alpha = 0, "
                    "the LoopLM end of stage 1, is checked equal to the teacher in tests/cache/test_melt.py)",
        "teacher_forced": "its parallel form is the chunk-wise forward, checked against streaming decode "
                          "in tests/cache/test_melt.py",
    }

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        return one_row_setting(shape, ratio)

    @classmethod
    def untrained_model(cls, teacher):
        """A MELT student of `teacher` (element-wise gate, zero-initialised) as served: one token per chunk."""
        from loopkv.models.melt_model import melt_from_teacher

        cls.check_serves(teacher.config)
        return melt_from_teacher(teacher, "full", chunk_size=1).eval().requires_grad_(False)

    def __init__(self, config, alpha: float = 1.0, record_outputs: bool = False):
        super().__init__(config)
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha = alpha
        self.keys: list[torch.Tensor | None] = [None] * self.num_layers   # post-RoPE, one row per token
        self.values: list[torch.Tensor | None] = [None] * self.num_layers
        self.base = FullLoopCache(config) if alpha < 1.0 else None
        # attention outputs per (loop, layer), chunks concatenated along tokens (stage-2 alignment)
        self.outputs: dict[tuple[int, int], torch.Tensor] | None = {} if record_outputs else None

    def begin_forward(self, positions):
        super().begin_forward(positions)
        if self.base is not None:
            self.base.begin_forward(positions)

    def end_forward(self):
        super().end_forward()
        if self.base is not None:
            self.base.end_forward()

    def attend(self, loop, layer, positions, q, k, v, mask):
        raise TypeError("the melt cache serves MELT models only (config.melt_gate set); "
                        "their attention calls attend_melt")

    def attend_melt(self, loop, layer, positions, q, kv_melt, kv_base, mask):
        """kv_melt: the new tokens' (k, v) projected from their MELT state; kv_base: projected from
        the loop's own input (needed only while alpha < 1, else None). Returns (B, H, L, d_head)."""
        keys, values = self.update(loop, layer, positions, *kv_melt)
        if self.base is not None:
            if kv_base is None:
                raise ValueError("alpha < 1 needs the base K/V of the new tokens")
            base_keys, base_values = self.base.update(loop, layer, positions, *kv_base)
            keys = self.alpha * keys + (1 - self.alpha) * base_keys
            values = self.alpha * values + (1 - self.alpha) * base_values
        out = attention(q, keys, values, mask)
        if self.outputs is not None:
            self.outputs[loop, layer] = concat(self.outputs.get((loop, layer)), out)
        return out

    @property
    def needs_base(self) -> bool:
        return self.base is not None

    def update(self, loop, layer, positions, k, v):
        new_k = self.rope(positions, k)
        n = k.shape[2]
        if loop == 0:   # the new tokens' rows come into existence
            self.keys[layer] = concat(self.keys[layer], new_k)
            self.values[layer] = concat(self.values[layer], v)
        elif torch.is_grad_enabled() and (new_k.requires_grad or self.keys[layer].requires_grad):
            # training: the same overwrite, out of place, so gradients reach every loop's state
            self.keys[layer] = torch.cat([self.keys[layer][:, :, :-n], new_k], dim=2)
            self.values[layer] = torch.cat([self.values[layer][:, :, :-n], v], dim=2)
        else:
            self.keys[layer][:, :, -n:] = new_k
            self.values[layer][:, :, -n:] = v
        return self.keys[layer], self.values[layer]

    def loop_bytes_per_token(self, dtype):
        element = torch.tensor([], dtype=dtype).element_size()
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * element

    def loop_tensors(self):
        own = [t for t in self.keys + self.values if t is not None]
        return own + (self.base.loop_tensors() if self.base is not None else [])

    def reorder_cache(self, beam_idx):
        super().reorder_cache(beam_idx)
        if self.outputs:   # the recorded attention outputs (bookkeeping: not stored K/V) follow their rows
            self.outputs = {key: out.index_select(0, beam_idx.to(out.device)) for key, out in self.outputs.items()}

    def keep_tokens(self, index):
        super().keep_tokens(index)
        if self.base is not None:   # stage 1's per-loop K/V: the same tokens
            self.base.keep_tokens(index)
