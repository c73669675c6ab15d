"""Config of the Huginn ("Raven") recurrent-depth LM (model_type "huginn_raven"), readable from real
Huginn checkpoints' config.json (the reference RavenConfig's field names).

Shape: a prelude of `n_layers_in_prelude` blocks, a core of `n_layers_in_recurrent_block` blocks run
`num_steps` times (a forward argument; `mean_recurrence` by default), a coda of `n_layers_in_coda`
blocks. `attribute_map` gives loopkv's shape names (the ones the caches read, Ouro's) to Huginn's
fields: D = the core's layers, T = the default step count; the prelude and coda are the cache's
non-looped ("outer") layers.
"""
from __future__ import annotations

from transformers import AutoConfig, PreTrainedConfig

from loopkv.errors import LoopKVError
from loopkv.models.families import CHECKPOINT_FIELDS


class HuginnConfig(PreTrainedConfig):
    model_type = "huginn_raven"
    keys_to_ignore_at_inference = ["cache"]
    # loopkv's names (the caches read Ouro's) for Huginn's fields: D = the core's layers each step runs,
    # T = the default step count; one map, the config checker's, so the two cannot drift apart
    attribute_map = {**{key.split(".", 1)[1]: field for key, field in CHECKPOINT_FIELDS["huginn"].items()
                        if key.startswith("arch.") and key.split(".", 1)[1] != field},
                     "tie_word_embeddings": "tie_embeddings"}

    # defaults: the released Huginn-0125 checkpoint's
    n_embd: int = 5280
    n_heads: int = 55
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    n_layers: int = 8                      # stored only (P + R + C)
    n_layers_in_prelude: int = 2
    n_layers_in_recurrent_block: int = 4
    n_layers_in_coda: int = 2
    intermediate_size: int = 17920
    block_size: int = 4096                 # rows of the stored RoPE table (freqs_cis)
    vocab_size: int = 65536
    padded_vocab_size: int | None = None   # rows of wte; the reference sets it to vocab_size
    padding_multiple: int = 4096           # stored only
    tie_embeddings: bool = True
    bias: bool = False                     # of the adapter (and, in the reference, of nothing else used)
    qk_bias: bool = True
    rope_base: float | int = 50000
    norm_eps: float = 1e-6
    mean_recurrence: int = 32
    mean_backprop_depth: int = 8
    test_time_noise: float | int = 0
    test_time_noise_type: str = "fixed"
    init_values: dict | None = None        # stored; `std` is the initial state's std at init_scale 1
    effective_expected_depth: int | None = None
    # stored only: the reference reads none of these (its classes are fixed)
    architecture_class_name: str = "RecurrentGPT"
    block_class_name: str = "SandwichBlock"
    norm_class_name: str = "RMSNorm_llama"
    mlp_class_name: str = "GatedMLP"
    nonlin_name: str = "SiLU"
    init_strategy: str = "takase"
    init_orthogonal: bool = False
    state_init: str = "like-init"
    injection_type: str = "linear"
    sampling_scheme: str = "poisson-lognormal-filling"
    activation_checkpoint_impl: str = "per-iteration"
    use_cache: bool = True
    # the tokenizer's special tokens (the released checkpoint's config.json states them; generation reads them)
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    # Which KV method a forward or generate() builds when the caller passes no cache (see loopkv.cache).
    kv_method: str = "full"

    def __post_init__(self, **kwargs):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.n_heads
        if self.head_dim is None:
            self.head_dim = self.n_embd // self.n_heads
        if self.padded_vocab_size is None:
            self.padded_vocab_size = self.vocab_size
        if self.effective_expected_depth is None:
            self.effective_expected_depth = (self.n_layers_in_prelude + self.n_layers_in_coda
                                             + self.n_layers_in_recurrent_block * self.mean_recurrence)
        super().__post_init__(**kwargs)
        self.validate_architecture()   # transformers 5 runs only its base class's validators itself

    # -- the shape as loopkv's caches read it (properties: not saved to config.json) -------
    @property
    def num_outer_layers(self) -> int:
        """Non-looped layers, each run once per token: prelude i is outer layer i, coda i is P + i."""
        return self.n_layers_in_prelude + self.n_layers_in_coda

    @property
    def rope_style(self) -> str:
        return "interleaved"   # adjacent pairs (2i, 2i+1), the reference's complex-number form

    @property
    def init_std(self) -> float:
        """Std of the initial recurrent state at init_scale 1, before the embedding scale."""
        return (2 / (5 * self.n_embd)) ** 0.5

    def validate_architecture(self):
        # LoopKVError, not ValueError: these come from a checkpoint's config.json, for the user to act on
        if self.padded_vocab_size != self.vocab_size:
            raise LoopKVError(
                f"Huginn config: padded_vocab_size ({self.padded_vocab_size}) differs from vocab_size "
                f"({self.vocab_size}); the reference RavenConfig sets padded_vocab_size = vocab_size (the "
                "rows of wte and of the head), so this config was not written by it and its vocabulary "
                "padding is ambiguous")
        if self.head_dim * self.n_heads != self.n_embd:
            raise LoopKVError(f"Huginn config: head_dim ({self.head_dim}) x n_heads ({self.n_heads}) "
                              f"must equal n_embd ({self.n_embd})")
        if self.num_key_value_heads != self.n_heads:
            # qk_bias has one k row per query head: the reference's layout has no grouped K/V
            raise LoopKVError(f"Huginn config: num_key_value_heads ({self.num_key_value_heads}) must equal "
                              f"n_heads ({self.n_heads})")
        if self.head_dim % 2:
            raise LoopKVError(f"Huginn config: head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.test_time_noise:
            raise LoopKVError(f"Huginn config: test_time_noise {self.test_time_noise} is not implemented (use 0)")
        if self.mean_recurrence < 1:
            raise LoopKVError(f"Huginn config: mean_recurrence must be >= 1, got {self.mean_recurrence}")


AutoConfig.register("huginn_raven", HuginnConfig, exist_ok=True)   # AutoConfig.from_pretrained without remote code
