"""The looped model families loopkv implements, as plain data (no torch: the config's validation and
the Snakefile read it): each family's config.json model_type, the module whose import registers it
with transformers' Auto classes, and where a checkpoint's config.json states each of model.arch's
shape names (and model.huginn's)."""
from __future__ import annotations

MODEL_TYPES = {"ouro": "ouro", "huginn": "huginn_raven"}                  # model.family -> model_type
MODULES = {"ouro": "loopkv.models.modeling_ouro", "huginn_raven": "loopkv.models.modeling_huginn"}

# model.family -> {config key (dotted under model.) -> the field of the checkpoint's config.json that
# states it}; a family not listed names its fields as model.arch does (Ouro)
CHECKPOINT_FIELDS = {
    "huginn": {"arch.hidden_size": "n_embd", "arch.num_hidden_layers": "n_layers_in_recurrent_block",
               "arch.total_ut_steps": "mean_recurrence", "arch.num_attention_heads": "n_heads",
               "arch.head_dim": "head_dim", "arch.intermediate_size": "intermediate_size",
               "arch.rope_theta": "rope_base", "arch.max_position_embeddings": "block_size",
               "arch.rms_norm_eps": "norm_eps", "huginn.prelude_layers": "n_layers_in_prelude",
               "huginn.coda_layers": "n_layers_in_coda", "huginn.backprop_steps": "mean_backprop_depth"},
}
