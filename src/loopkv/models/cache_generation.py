"""transformers' generate() with a loopkv cache: every looped model family builds its configured
LoopCache (the teacher's full cache by default) instead of transformers' own cache classes."""
from __future__ import annotations

from loopkv.cache import make_cache


class LoopCacheGeneration:
    """Listed before GenerationMixin in a model's bases (transformers decides that a class can generate
    by finding GenerationMixin itself among them)."""

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        cache = model_kwargs.get("cache")
        if cache is not None:   # the caller's cache (a KV method's): kept, and never reset by generate()
            cache._is_user_defined = True
            return
        if generation_config.use_cache is False:
            return
        model_kwargs["cache"] = make_cache(self.config.kv_method, self.config)
