"""A whole window in one parallel, differentiable forward, seen the way a KV method serves it.

In streaming decode, token i at (loop t, layer d) attends to every earlier token j through the
method's stored form of j's K/V, and to itself exactly (a token's own loops always use exact K/V).
The teacher-forced view reproduces that in one forward: each (t, d) attention takes the earlier
tokens' K/V from `view.reconstruct(t, d, source)` and keeps the diagonal exact.

`source` is a KVTrace of every token's exact pre-RoPE K/V. The LLA paper's two-pass forward uses
the frozen teacher's trace (pass 1 = teacher, pass 2 = student reading reconstructed teacher K/V);
feeding a pass's own trace back as the next pass's source converges to streaming decode exactly
after L passes (token i's K/V are final once tokens < i are), which is how the tests check it.
With source=None the view reads the forward's own exact K/V (the teacher itself when view = full).
"""
from __future__ import annotations

import math

import torch

from loopkv.cache.base import LoopCache, attention


class KVTrace:
    """Pre-RoPE K/V and attention outputs of one forward, per (loop, layer)."""

    def __init__(self):
        self.keys: dict[tuple[int, int], torch.Tensor] = {}
        self.values: dict[tuple[int, int], torch.Tensor] = {}
        self.outputs: dict[tuple[int, int], torch.Tensor] = {}

    def kv(self, kind: str, loop: int, layer: int) -> torch.Tensor:
        return (self.keys if kind == "k" else self.values)[loop, layer]

    def detached(self) -> "KVTrace":
        copy = KVTrace()
        for name in ("keys", "values", "outputs"):
            setattr(copy, name, {key: t.detach() for key, t in getattr(self, name).items()})
        return copy


def diagonal_exact_attention(q, past_k, past_v, own_k, own_v) -> torch.Tensor:
    """Causal attention where query i sees keys j < i as (past_k, past_v) and itself as
    (own_k, own_v). q, keys post-RoPE; all (B, H, L, d). Returns (B, H, L, d)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    n = q.shape[2]
    scores = (q @ past_k.transpose(-1, -2)) * scale
    below = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(-1)
    scores = scores.masked_fill(~below, float("-inf"))
    own = (q * own_k).sum(-1) * scale
    scores = torch.diagonal_scatter(scores, own, dim1=-2, dim2=-1)
    weights = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), dim=-1).to(q.dtype)
    diag = weights.diagonal(dim1=-2, dim2=-1)[..., None]
    # weights @ past_v counts the diagonal with the past value; swap in the token's own value
    return weights @ past_v + diag * (own_v - past_v)


class TeacherForcedCache(LoopCache):
    """A forward over a padding-free window with no past, attention read through `view`."""

    name = "teacher_forced"

    def __init__(self, config, view: LoopCache, source: KVTrace | None = None):
        super().__init__(config)
        self.view = view
        self.rotary = view.rotary   # the view's attention may rotate keys differently (decoupled RoPE)
        self.trace = KVTrace()
        self.source = source

    def attend(self, loop, layer, positions, q, k, v, mask):
        if mask is not None or self.get_seq_length():
            raise ValueError("the teacher-forced view runs on whole windows: no padding, no cached past")
        self.trace.keys[loop, layer], self.trace.values[loop, layer] = k, v
        past_k, past_v = self.view.reconstruct(loop, layer, self.trace if self.source is None else self.source)
        q = self.view.read_query(loop, layer, positions, q)
        groups = q.shape[1] // k.shape[1]
        expand = (lambda x: x.repeat_interleave(groups, dim=1)) if groups > 1 else (lambda x: x)
        out = diagonal_exact_attention(
            q, expand(self.rope(positions, past_k.to(q.dtype))), expand(past_v.to(q.dtype)),
            expand(self.rope(positions, k)), expand(v))
        self.trace.outputs[loop, layer] = out
        return out

    def attend_outer(self, layer, positions, q, k, v, mask):
        # non-looped layers are exact in every method: plain causal attention over the window
        if mask is not None or self.get_seq_length():
            raise ValueError("the teacher-forced view runs on whole windows: no padding, no cached past")
        return attention(q, self.rope(positions, k), v, None)

    def update(self, loop, layer, positions, k, v):
        raise NotImplementedError("TeacherForcedCache computes attention in attend()")

    def loop_bytes_per_token(self, dtype):
        return self.view.loop_bytes_per_token(dtype)

    def loop_tensors(self):
        return []


def teacher_forced_forward(model, input_ids: torch.Tensor, view: LoopCache, source: KVTrace | None = None,
                           output_loop_logits: bool = False, **forward_kwargs):
    """(model output, the forward's KVTrace) for a window read through `view`; `forward_kwargs` go to
    the model (Huginn: num_steps, input_states, init_scale)."""
    cache = TeacherForcedCache(model.config, view, source)
    if output_loop_logits:
        forward_kwargs["output_loop_logits"] = True
    out = model(input_ids, cache=cache, use_cache=False, **forward_kwargs)
    return out, cache.trace
