"""KV-cache methods for looped LMs, one per file, behind the LoopCache interface."""
from loopkv.cache.base import LoopCache
from loopkv.cache.registry import METHODS, make_cache, register_method, unregister_method

__all__ = ["LoopCache", "METHODS", "make_cache", "register_method", "unregister_method"]
