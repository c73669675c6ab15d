"""Our PyTorch implementation of Huginn ("Raven"), the recurrent-depth LM, loading real Huginn checkpoints.

Shape of the computation, per token (see tests/fixtures/huginn-tiny-reference/README.md):
    e = prelude(wte(tokens) * sqrt(n_embd))      # P blocks; cache: outer layers 0..P-1
    s = input_states (or a cut normal, times init_scale)
    for step t in 0..num_steps-1:
        s = adapter(cat[s, e])                   # state first
        for core layer j: s = core_j(s)          # cache: (loop t, layer j)
    latent = ln_f(s)
    x = ln_f(coda(latent))                       # C blocks; cache: outer layers P..P+C-1; ln_f again
    logits = x @ wte^T                           # tied head, float32
Every block is a sandwich on the stream: x = norm_2(x + attn(norm_1(x))); x = norm_4(x + mlp(norm_3(x))).
Attention: fused head-major Wqkv, qk_bias added to q and k before interleaved-pair RoPE, plain causal.
Cache keys vs the reference's block_idx: prelude i = i, core (t, j) = P + t*R + j, coda i = -(i+1).

Parameter names follow RavenForCausalLM (transformer.wte, transformer.core_block.{j}.attn.Wqkv, ...,
the persistent buffer freqs_cis), so `from_pretrained` loads real checkpoints with no remote code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModelForCausalLM, GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import ModelOutput

from loopkv.cache import LoopCache, make_cache
from loopkv.errors import LoopKVError
from loopkv.models.cache_generation import LoopCacheGeneration
from loopkv.models.configuration_huginn import HuginnConfig
from loopkv.models.huginn_checkpoint import check_rope_table, check_vocab_rows, rope_table
from loopkv.models.huginn_depth import sample_depth
from loopkv.models.masks import attention_mask_over_cache, padded_positions
from loopkv.models.modeling_ouro import RMSNorm
from loopkv.models.rope import Rotary


class HuginnAttention(nn.Module):
    """Self-attention whose K/V storage belongs to a LoopCache: core layers at (step, layer), prelude
    and coda layers as the cache's non-looped layers."""

    def __init__(self, config: HuginnConfig, layer_idx: int, looped: bool):
        super().__init__()
        self.layer_idx, self.looped = layer_idx, looped
        self.num_heads, self.num_kv_heads, self.head_dim = config.n_heads, config.num_key_value_heads, config.head_dim
        self.Wqkv = nn.Linear(config.n_embd, (self.num_heads + 2 * self.num_kv_heads) * self.head_dim, bias=False)
        # (q, k) x one row per head: added before RoPE
        self.qk_bias = nn.Parameter(torch.zeros(2, 1, self.num_heads, self.head_dim)) if config.qk_bias else None
        self.proj = nn.Linear(self.num_heads * self.head_dim, config.n_embd, bias=False)

    def forward(self, x, step, positions, rotary, rope_tables, mask, cache: LoopCache):
        b, n, _ = x.shape
        qkv = self.Wqkv(x).view(b, n, self.num_heads + 2 * self.num_kv_heads, self.head_dim)
        # slices, not split(): the same views, and the lazy test backend mishandles split's outputs
        h, kv = self.num_heads, self.num_kv_heads
        q, k, v = qkv[:, :, :h], qkv[:, :, h:h + kv], qkv[:, :, h + kv:]                     # (B, L, H, d)
        if self.qk_bias is not None:
            q, k = q + self.qk_bias[0], k + self.qk_bias[1]
        q = rotary.apply(q.transpose(1, 2), *rope_tables)
        k, v = k.transpose(1, 2), v.transpose(1, 2)                                          # (B, H, L, d)
        if self.looped:
            out = cache.attend(step, self.layer_idx, positions, q, k, v, mask)
        else:
            out = cache.attend_outer(self.layer_idx, positions, q, k, v, mask)
        return self.proj(out.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim))


class GatedMLP(nn.Module):
    def __init__(self, config: HuginnConfig):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 2 * config.intermediate_size, bias=False)   # [gate | up]
        self.proj = nn.Linear(config.intermediate_size, config.n_embd, bias=False)

    def forward(self, x):
        both = self.fc(x)
        half = both.shape[-1] // 2   # slices, not chunk(): the lazy test backend mishandles chunk's outputs
        return self.proj(F.silu(both[..., :half]) * both[..., half:])


class SandwichBlock(nn.Module):
    def __init__(self, config: HuginnConfig, layer_idx: int, looped: bool):
        super().__init__()
        eps = config.norm_eps
        self.norm_1, self.norm_2 = RMSNorm(config.n_embd, eps), RMSNorm(config.n_embd, eps)
        self.norm_3, self.norm_4 = RMSNorm(config.n_embd, eps), RMSNorm(config.n_embd, eps)
        self.attn = HuginnAttention(config, layer_idx, looped)
        self.mlp = GatedMLP(config)

    def forward(self, x, step, positions, rotary, rope_tables, mask, cache):
        # norm_2 / norm_4 re-normalise the stream itself (Ouro's sandwich norms the branch instead)
        x = self.norm_2(x + self.attn(self.norm_1(x), step, positions, rotary, rope_tables, mask, cache))
        return self.norm_4(x + self.mlp(self.norm_3(x)))


@dataclass
class HuginnCausalLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None                  # (B, L, padded_vocab_size), float32
    cache: LoopCache | None = None
    latent_states: torch.Tensor | None = None           # ln_f(final recurrent state): the coda's input
    core_states: tuple[torch.Tensor, ...] | None = None  # raw state after each step, when asked for
    prelude_out: torch.Tensor | None = None             # the prelude's output e, when asked for

    @property
    def past_key_values(self):   # the reference's name for it
        return self.cache


class HuginnForCausalLM(PreTrainedModel, LoopCacheGeneration, GenerationMixin):
    config_class = HuginnConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["SandwichBlock"]
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    supports_gradient_checkpointing = False
    # a forward without input_states draws each row's initial state from the generator (init_scale 1):
    # a row's result depends on the draws of the rows prefilled beside it
    draws_initial_states = True

    def __init__(self, config: HuginnConfig):
        super().__init__(config)
        P, R, C = config.n_layers_in_prelude, config.n_layers_in_recurrent_block, config.n_layers_in_coda
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
            prelude=nn.ModuleList(SandwichBlock(config, i, looped=False) for i in range(P)),
            adapter=nn.Linear(2 * config.n_embd, config.n_embd, bias=config.bias),
            core_block=nn.ModuleList(SandwichBlock(config, j, looped=True) for j in range(R)),
            coda=nn.ModuleList(SandwichBlock(config, P + i, looped=False) for i in range(C)),
            ln_f=RMSNorm(config.n_embd, config.norm_eps),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=False)
        # the reference's stored RoPE table: loaded and checked against ours (huginn_checkpoint), not read
        self.register_buffer("freqs_cis", rope_table(config), persistent=True)
        self.rotary = Rotary(config.head_dim, config.rope_base, "interleaved")   # what q and the cache use
        self.emb_scale = math.sqrt(config.n_embd)   # from n_embd, not from a config flag
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' loading, with the vocabulary rows checked first and the RoPE table after."""
        check_vocab_rows(pretrained_model_name_or_path, kwargs.get("config"))
        loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        check_rope_table(loaded[0] if isinstance(loaded, tuple) else loaded)
        return loaded

    @torch.no_grad()
    def _init_weights(self, module):
        # from-scratch init only (checkpoints carry their own): the reference's small std, not its scheme
        std = self.config.init_std
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.normal_(0.0, std)
            if getattr(module, "bias", None) is not None:
                module.bias.zero_()
        elif isinstance(module, RMSNorm):
            module.weight.fill_(1.0)
        elif isinstance(module, HuginnAttention) and module.qk_bias is not None:
            module.qk_bias.zero_()
        elif isinstance(module, HuginnForCausalLM):
            module.freqs_cis.copy_(rope_table(self.config))

    def get_input_embeddings(self):
        return self.transformer.wte

    def set_input_embeddings(self, value):
        self.transformer.wte = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids=None, input_states=None, attention_mask=None, position_ids=None, labels=None,
                num_steps=None, past_key_values=None, cache=None, use_cache=None, cache_position=None,
                init_scale: float = 1.0, output_core_states: bool = False, inputs_embeds=None,
                return_dict=None, **kwargs) -> HuginnCausalLMOutput:
        """num_steps: n (n steps, all without grad, as the reference), (n, k) (n without grad, then k
        with), or None (eval mode: mean_recurrence without grad; training: a sampled (n, k)). input_states (B, L, n_embd): the initial
        state; without it a cut normal of std init_std * init_scale (0: zeros), times sqrt(n_embd).
        Positions: position_ids, else cache_position, else the tokens after the cached ones (the
        reference uses 0.. there, wrong for a decode step), left pads of attention_mask not counted.
        attention_mask (B, past + n), 0 = a left pad: pads are masked as keys, so a padded row computes
        what it computes alone (the reference ignores the mask: equal for an all-ones mask)."""
        if inputs_embeds is not None or input_ids is None:
            raise ValueError("pass input_ids (a Huginn forward starts from token ids)")
        cache = cache if cache is not None else past_key_values
        if cache is None:
            cache = make_cache(self.config.kv_method, self.config)
        use_cache = self.config.use_cache if use_cache is None else use_cache
        no_grad_steps, grad_steps = self._steps(num_steps)
        b, n = input_ids.shape
        past = cache.get_seq_length()
        positions = _positions(position_ids, cache_position, attention_mask, past, b, n, input_ids.device)
        mask = attention_mask_over_cache(attention_mask, past, n, input_ids.device, b)
        rope_tables = self.rotary.cos_sin(positions, self.dtype)
        run = lambda block, x, step=None: block(x, step, positions, self.rotary, rope_tables, mask, cache)  # noqa: E731
        t = self.transformer

        cache.expect_loops(no_grad_steps + grad_steps)
        cache.begin_forward(positions)
        e = t.wte(input_ids) * self.emb_scale
        for block in t.prelude:
            e = run(block, e)
        s = self.initial_state(e, init_scale) if input_states is None else input_states.to(e.dtype)
        states, grad = [], torch.is_grad_enabled()
        for step in range(no_grad_steps + grad_steps):
            with torch.set_grad_enabled(grad and step >= no_grad_steps):
                s = t.adapter(torch.cat([s, e], dim=-1))
                for block in t.core_block:
                    s = run(block, s, step)
            if output_core_states:
                states.append(s)
        latent = t.ln_f(s)
        x = latent
        for block in t.coda:
            x = run(block, x)
        cache.end_forward()
        logits = self.lm_head(t.ln_f(x)).float()

        loss = None
        if labels is not None:   # transformers' convention: labels are the inputs, shifted here
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        return HuginnCausalLMOutput(
            loss=loss, logits=logits, cache=cache if use_cache else None, latent_states=latent,
            core_states=tuple(states) if output_core_states else None,
            prelude_out=e if output_core_states else None)

    def initial_state(self, like: torch.Tensor, init_scale: float = 1.0) -> torch.Tensor:
        """The reference's random start: normal of std init_std * init_scale cut at 3 std, times the
        embedding scale (about N(0, 0.62^2) cut at 1.90 whatever n_embd); init_scale 0 gives zeros."""
        if not init_scale:
            return torch.zeros_like(like)
        # drawn by the host's generator, then moved: a seeded run starts from the same states on any device
        state = torch.zeros(like.shape, dtype=like.dtype)
        std = self.config.init_std * init_scale
        nn.init.trunc_normal_(state, mean=0.0, std=std, a=-3 * std, b=3 * std)
        return (state * self.emb_scale).to(like.device)

    def loop_forward_kwargs(self, input_ids: torch.Tensor, grad: bool = False) -> dict:
        """What a forward over `input_ids` needs so that two forwards over them run the same computation
        through the config's steps (see OuroForCausalLM's): one draw of the initial state (B, L, n_embd),
        shared, and the steps as (0, T) when `grad` (the reference runs an int count without grad)."""
        b, n = input_ids.shape
        like = torch.empty(b, n, self.config.n_embd, dtype=self.dtype, device=input_ids.device)
        steps = self.config.mean_recurrence
        return {"num_steps": (0, steps) if grad else steps, "input_states": self.initial_state(like)}

    def _steps(self, num_steps) -> tuple[int, int]:
        """(steps without grad, steps with grad)."""
        if num_steps is None:   # training: a sampled depth (models/huginn_depth.py); eval: the mean, no grad
            if self.training:
                return sample_depth(self.config.mean_recurrence, self.config.mean_backprop_depth)
            return self.config.mean_recurrence, 0
        if isinstance(num_steps, (tuple, list)) or (torch.is_tensor(num_steps) and num_steps.numel() == 2):
            n, k = (int(x) for x in num_steps)
        else:
            n, k = int(num_steps), 0
        if n < 0 or k < 0 or n + k < 1:
            raise LoopKVError(f"num_steps must give at least one step, got {num_steps!r}")
        return n, k



def _positions(position_ids, cache_position, attention_mask, past: int, batch: int, n: int, device) -> torch.Tensor:
    """RoPE positions (B, L) of the new tokens."""
    if position_ids is not None:
        return position_ids.expand(batch, n)
    if cache_position is not None and attention_mask is None:   # a padding mask's positions skip the pads
        return cache_position.view(1, n).expand(batch, n)
    return padded_positions(attention_mask, past, n, device, batch)


# model type "huginn_raven" for transformers' Auto classes (its config registers in configuration_huginn):
# importing this module is what makes AutoModelForCausalLM.from_pretrained(huginn_dir) work without
# trust_remote_code
AutoModelForCausalLM.register(HuginnConfig, HuginnForCausalLM, exist_ok=True)
