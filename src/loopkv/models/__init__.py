"""The looped LM. Importing this registers model type "ouro" with transformers' Auto classes."""
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from loopkv.models.configuration_ouro import OuroConfig
from loopkv.models.modeling_ouro import OuroForCausalLM, OuroModel, exit_distribution

AutoConfig.register("ouro", OuroConfig, exist_ok=True)
AutoModel.register(OuroConfig, OuroModel, exist_ok=True)
AutoModelForCausalLM.register(OuroConfig, OuroForCausalLM, exist_ok=True)

__all__ = ["OuroConfig", "OuroModel", "OuroForCausalLM", "exit_distribution"]
