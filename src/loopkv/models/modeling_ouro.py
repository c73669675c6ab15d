"""Our PyTorch implementation of the Ouro looped LM (LoopLM), loading real Ouro checkpoints.

Shape of the computation, per token (see tests/fixtures/ouro-tiny-reference/README.md):
    h = embed(tokens)
    for loop t in 0..T-1:
        for shared layer d in 0..D-1:          # sandwich-normed: norm -> attn -> norm, residual
            h = layer_d(h, loop=t)             # attention K/V go through the cache at (t, d)
        h = norm(h)                            # the normed state is loop t's output
        logits_t = lm_head(h); gate_t = early_exit_gate(h)
Exit distribution: lambda_t = sigmoid(gate_t), p_t = lambda_t * prod_{j<t}(1 - lambda_j),
the last loop takes the remaining mass.

Parameter names follow Ouro's checkpoints (model.layers.{i}.self_attn.q_proj, input_layernorm_2,
model.early_exit_gate, ...), so `from_pretrained` loads them with no remote code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoModelForCausalLM, GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import ModelOutput

from loopkv.cache import LoopCache, make_cache
from loopkv.models.cache_generation import LoopCacheGeneration
from loopkv.models.masks import attention_mask_over_cache, padded_positions
from loopkv.models.configuration_ouro import OuroConfig
from loopkv.models.melt_gate import MeltGate
from loopkv.models.rope import Rotary, apply_rope


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalise in float32 so bf16 runs match the fp32 reference closely
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class SublayerOutputNorm(RMSNorm):
    """The second norm of the sandwich (input_layernorm_2, post_attention_layernorm_2): it sets the
    scale of what each sublayer adds to the residual stream. Its own class only for initialisation."""


class SwiGLU(nn.Module):
    def __init__(self, config: OuroConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class ExitGate(nn.Linear):
    """hidden -> one exit logit per token and loop (a Linear; its own class only for initialisation)."""

    def __init__(self, hidden_size: int):
        super().__init__(hidden_size, 1)


class OuroAttention(nn.Module):
    """Multi-head attention whose K/V storage (and the attention over it) belong to a LoopCache."""

    def __init__(self, config: OuroConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        # MELT: K/V are projected from a gated state carried across loops, not from x alone
        self.melt_gate = (MeltGate(config.hidden_size, config.melt_gate, config.melt_ema_decay)
                          if config.melt_gate is not None else None)

    def forward(self, x, loop: int, positions, rope_tables, mask, cache: LoopCache, loop_states: dict):
        """loop_states: per-forward scratch shared by the T loops (MELT's state per layer)."""
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, *rope_tables)
        if self.melt_gate is None:
            out = cache.attend(loop, self.layer_idx, positions, q, *self._kv(x), mask)
        else:
            if not hasattr(cache, "attend_melt"):
                raise TypeError(f"a MELT model reads K/V through the melt cache, not {type(cache).__name__}")
            state = self.melt_gate(loop, x, loop_states.get(self.layer_idx))
            loop_states[self.layer_idx] = state
            base = self._kv(x) if cache.needs_base else None
            out = cache.attend_melt(loop, self.layer_idx, positions, q, self._kv(state), base, mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim))

    def _kv(self, x):
        b, n, _ = x.shape
        k = self.k_proj(x).view(b, n, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return k, v


class OuroDecoderLayer(nn.Module):
    def __init__(self, config: OuroConfig, layer_idx: int):
        super().__init__()
        self.self_attn = OuroAttention(config, layer_idx)
        self.mlp = SwiGLU(config)
        eps = config.rms_norm_eps
        self.input_layernorm = RMSNorm(config.hidden_size, eps)
        self.input_layernorm_2 = SublayerOutputNorm(config.hidden_size, eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps)
        self.post_attention_layernorm_2 = SublayerOutputNorm(config.hidden_size, eps)

    def forward(self, x, loop, positions, rope_tables, mask, cache, loop_states):
        attn = self.self_attn(self.input_layernorm(x), loop, positions, rope_tables, mask, cache, loop_states)
        x = x + self.input_layernorm_2(attn)
        return x + self.post_attention_layernorm_2(self.mlp(self.post_attention_layernorm(x)))


class OuroPreTrainedModel(PreTrainedModel):
    config_class = OuroConfig
    base_model_prefix = "model"
    _no_split_modules = ["OuroDecoderLayer"]
    supports_gradient_checkpointing = False

    @torch.no_grad()
    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.normal_(0.0, std)
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.normal_(0.0, std)
        elif isinstance(module, SublayerOutputNorm):
            # < 1 scales each sublayer's contribution down at init, so in a deep shared stack (D*T
            # applications) the residual stream keeps token identity and copying circuits form early
            module.weight.fill_(self.config.sublayer_norm_init)
        elif isinstance(module, RMSNorm):
            module.weight.fill_(1.0)
        if isinstance(module, ExitGate) and self.config.total_ut_steps > 1:
            # gate bias logit(1/T): the first loop exits with prob 1/T and the last keeps the most
            # mass, so from-scratch training does not start by starving the later loops
            module.bias.fill_(-math.log(self.config.total_ut_steps - 1))


@dataclass
class OuroModelOutput(ModelOutput):
    last_hidden_state: torch.Tensor | None = None  # the last loop's normed state
    loop_hidden_states: tuple[torch.Tensor, ...] | None = None  # each loop's normed state
    gate_logits: torch.Tensor | None = None  # (B, L, T)
    cache: LoopCache | None = None


class OuroModel(OuroPreTrainedModel):
    def __init__(self, config: OuroConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(OuroDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.early_exit_gate = ExitGate(config.hidden_size)
        self.rotary = Rotary(config.head_dim, config.rope_theta)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None,
                inputs_embeds=None, **kwargs) -> OuroModelOutput:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        h = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if cache is None:
            cache = make_cache(self.config.kv_method, self.config)
        past = cache.get_seq_length()
        n = h.shape[1]
        if position_ids is None:
            position_ids = padded_positions(attention_mask, past, n, h.device, h.shape[0])
        chunk = self.config.melt_chunk_size if self.config.melt_gate is not None else None
        if chunk is None or n <= chunk:
            return self._forward_chunk(h, attention_mask, position_ids, cache, past)
        # MELT chunk-wise: a chunk's tokens finish all T loops before the next chunk reads their rows
        pieces = []
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            sub_mask = None if attention_mask is None else attention_mask[:, :past + end]
            pieces.append(self._forward_chunk(h[:, start:end], sub_mask, position_ids[:, start:end],
                                              cache, past + start))
        return OuroModelOutput(
            last_hidden_state=torch.cat([p.last_hidden_state for p in pieces], dim=1),
            loop_hidden_states=tuple(torch.cat(s, dim=1) for s in zip(*(p.loop_hidden_states for p in pieces))),
            gate_logits=torch.cat([p.gate_logits for p in pieces], dim=1), cache=cache,
        )

    def _forward_chunk(self, h, attention_mask, position_ids, cache, past) -> OuroModelOutput:
        n = h.shape[1]
        mask = attention_mask_over_cache(attention_mask, past, n, h.device, h.shape[0])
        rope_tables = self.rotary.cos_sin(position_ids, h.dtype)
        states, gates, loop_states = [], [], {}
        cache.begin_forward(position_ids)
        for loop in range(self.config.total_ut_steps):
            for layer in self.layers:
                h = layer(h, loop, position_ids, rope_tables, mask, cache, loop_states)
            h = self.norm(h)
            states.append(h)
            gates.append(self.early_exit_gate(h))
        cache.end_forward()
        return OuroModelOutput(
            last_hidden_state=h, loop_hidden_states=tuple(states),
            gate_logits=torch.cat(gates, dim=-1), cache=cache,
        )


@dataclass
class OuroCausalLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # of the chosen exit (default: the last loop)
    cache: LoopCache | None = None
    loop_logits: tuple[torch.Tensor, ...] | None = None  # every loop's logits, when asked for
    exit_pdf: torch.Tensor | None = None  # (B, L, T)
    exit_step: torch.Tensor | None = None  # (B, L) loop whose logits were returned


class OuroForCausalLM(OuroPreTrainedModel, LoopCacheGeneration, GenerationMixin):
    def __init__(self, config: OuroConfig):
        super().__init__(config)
        self.model = OuroModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None,
                past_key_values=None, inputs_embeds=None, labels=None, use_cache=None,
                exit_at_step: int | None = None, exit_threshold: float | None = None,
                output_loop_logits: bool = False, return_dict=None, **kwargs) -> OuroCausalLMOutput:
        """Exits choose which loop's logits are returned; all T loops always run, so every
        (loop, layer) cache entry exists for the tokens that follow (Ouro's KV layout)."""
        cache = cache if cache is not None else past_key_values
        use_cache = self.config.use_cache if use_cache is None else use_cache
        exit_at_step = self.config.exit_at_step if exit_at_step is None else exit_at_step
        exit_threshold = self.config.exit_threshold if exit_threshold is None else exit_threshold
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache, inputs_embeds=inputs_embeds)
        pdf = exit_distribution(out.gate_logits)
        steps = self._exit_steps(pdf, exit_at_step, exit_threshold)
        T = self.config.total_ut_steps
        if output_loop_logits:
            loop_logits = tuple(self.lm_head(s) for s in out.loop_hidden_states)
            logits = loop_logits[-1] if steps is None else _select_by_step(torch.stack(loop_logits), steps)
        else:
            loop_logits = None
            if steps is None:
                logits = self.lm_head(out.loop_hidden_states[-1])
            else:
                hidden = _select_by_step(torch.stack(out.loop_hidden_states), steps)
                logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(),
                                   ignore_index=-100)
        if steps is None:
            steps = torch.full(pdf.shape[:2], T - 1, device=pdf.device, dtype=torch.long)
        return OuroCausalLMOutput(
            loss=loss, logits=logits, cache=out.cache if use_cache else None,
            loop_logits=loop_logits, exit_pdf=pdf, exit_step=steps,
        )

    def loop_forward_kwargs(self, input_ids: torch.Tensor, grad: bool = False) -> dict:
        """What a forward over `input_ids` needs so that two forwards over them run the same
        computation through every loop, with gradient through all of them when `grad` (distillation's
        two passes, calibration, a method's fidelity to the teacher). A tensor value is per token,
        (B, L, ...), for a caller that feeds the tokens in pieces to slice. Nothing for Ouro, whose
        forward is deterministic and differentiable."""
        return {}

    def _exit_steps(self, pdf, exit_at_step, exit_threshold):
        T = self.config.total_ut_steps
        if exit_at_step is not None:
            if not 0 <= exit_at_step < T:
                raise ValueError(f"exit_at_step must be in [0, {T - 1}], got {exit_at_step}")
            return torch.full(pdf.shape[:2], exit_at_step, device=pdf.device, dtype=torch.long)
        if exit_threshold is not None:
            # first loop whose exit CDF reaches the threshold; the last loop otherwise
            reached = pdf.cumsum(-1) >= exit_threshold
            reached[..., -1] = True
            return reached.float().argmax(-1)
        return None



def exit_distribution(gate_logits: torch.Tensor) -> torch.Tensor:
    """(B, L, T) gate logits -> exit probabilities; the last loop takes the remaining mass."""
    lam = torch.sigmoid(gate_logits.float())
    survive = torch.cumprod(1 - lam, dim=-1)
    survive_before = torch.cat([torch.ones_like(survive[..., :1]), survive[..., :-1]], dim=-1)
    pdf = lam * survive_before
    return torch.cat([pdf[..., :-1], survive_before[..., -1:]], dim=-1)


def _select_by_step(stacked: torch.Tensor, steps: torch.Tensor | None) -> torch.Tensor:
    """stacked (T, B, L, X), steps (B, L) -> (B, L, X); None -> the last loop."""
    if steps is None:
        return stacked[-1]
    index = steps[None, ..., None].expand(1, *steps.shape, stacked.shape[-1])
    return stacked.gather(0, index)[0]




# model type "ouro" for transformers' Auto classes (its config registers in configuration_ouro):
# importing this module is what makes AutoModelForCausalLM.from_pretrained(ouro_dir) work without
# trust_remote_code
AutoModel.register(OuroConfig, OuroModel, exist_ok=True)
AutoModelForCausalLM.register(OuroConfig, OuroForCausalLM, exist_ok=True)
