"""The looped LMs. Importing modeling_ouro / modeling_huginn (or any model class from here, e.g.
`from loopkv.models import OuroForCausalLM`) registers model type "ouro" / "huginn_raven" with
transformers' Auto classes. The names resolve on first use, so that a model-free command importing, say,
loopkv.models.commands starts without torch and transformers."""
import importlib

_HOMES = {"OuroConfig": "configuration_ouro", "OuroModel": "modeling_ouro", "OuroForCausalLM": "modeling_ouro",
          "exit_distribution": "modeling_ouro",
          "HuginnConfig": "configuration_huginn", "HuginnForCausalLM": "modeling_huginn"}

__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
