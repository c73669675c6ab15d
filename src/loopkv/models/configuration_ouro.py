"""Config of the Ouro looped LM (model_type "ouro"), readable from real Ouro checkpoints' config.json."""
from __future__ import annotations

from transformers import AutoConfig, PreTrainedConfig


class OuroConfig(PreTrainedConfig):
    """Ouro / LoopLM: `num_hidden_layers` shared layers run `total_ut_steps` times per token.

    Field names are Ouro's own, so a real checkpoint's config.json loads unchanged; keys Ouro has
    that we do not use (sliding window, auto_map, ...) are kept as plain attributes.
    """

    model_type = "ouro"
    keys_to_ignore_at_inference = ["cache"]

    vocab_size: int = 49152
    hidden_size: int = 2048
    intermediate_size: int = 5632
    num_hidden_layers: int = 24
    num_attention_heads: int = 16
    num_key_value_heads: int | None = None
    # Ouro's code defaults head_dim to 128 whatever the hidden size, so it must be explicit.
    head_dim: int = 128
    hidden_act: str = "silu"
    max_position_embeddings: int = 65536
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    attention_bias: bool = False
    use_cache: bool = True
    tie_word_embeddings: bool = False
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    # Initial weight of the sandwich's output norms (from-scratch training only; checkpoints carry
    # their own). Ouro's code initialises it to 1.
    sublayer_norm_init: float = 1.0
    # T: how many times the shared stack runs per token.
    total_ut_steps: int = 4
    # Inference-time exit: a fixed loop (0-based) or a threshold on the exit CDF; None = last loop.
    exit_at_step: int | None = None
    exit_threshold: float | None = None
    # Which KV method generate() builds when the caller passes no cache (see loopkv.cache).
    kv_method: str = "full"
    # MELT (a model variant, loopkv.models.melt_gate): None = the plain LoopLM. Otherwise each
    # layer's K/V come from a gated cross-loop state of this variant, read through the "melt" cache.
    melt_gate: str | None = None
    melt_ema_decay: float = 0.5
    # MELT forwards run chunk-wise: parallel inside chunks of this many tokens, sequential across
    # them (a token sees earlier chunks through their final rows); None = one chunk per forward.
    melt_chunk_size: int | None = None
    melt_train_chunk_size: int | None = None   # provenance: the chunk size the model was trained with

    def __post_init__(self, **kwargs):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        super().__post_init__(**kwargs)

    def validate_architecture(self):
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.melt_gate is not None:
            from loopkv.models.melt_gate import VARIANTS
            if self.melt_gate not in VARIANTS:
                raise ValueError(f"melt_gate must be one of {VARIANTS} or None, got {self.melt_gate!r}")
        if self.melt_chunk_size is not None and self.melt_chunk_size < 1:
            raise ValueError(f"melt_chunk_size must be >= 1 or None, got {self.melt_chunk_size}")
        if self.total_ut_steps < 1:
            raise ValueError(f"total_ut_steps must be >= 1, got {self.total_ut_steps}")


AutoConfig.register("ouro", OuroConfig, exist_ok=True)   # AutoConfig.from_pretrained(ouro_dir) without remote code
