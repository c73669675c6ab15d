"""Name -> KV method class. Adding a method = one file in loopkv/cache and one line here."""
from __future__ import annotations

from loopkv.cache.base import LoopCache
from loopkv.cache.cla import CLACache
from loopkv.cache.final_loop import FinalLoopCache
from loopkv.cache.full import FullLoopCache
from loopkv.cache.kv_quant import QuantCache
from loopkv.cache.lla import LLACache
from loopkv.cache.lla2d import LLA2DCache
from loopkv.cache.melt import MeltCache
from loopkv.cache.mla_head import MLAHeadCache
from loopkv.errors import LoopKVError

METHODS: dict[str, type[LoopCache]] = {
    FullLoopCache.name: FullLoopCache,
    LLACache.name: LLACache,
    LLA2DCache.name: LLA2DCache,
    FinalLoopCache.name: FinalLoopCache,
    MLAHeadCache.name: MLAHeadCache,
    CLACache.name: CLACache,
    QuantCache.name: QuantCache,
    MeltCache.name: MeltCache,
}


def make_cache(name: str, config, **kwargs) -> LoopCache:
    try:
        cls = METHODS[name]
    except KeyError:
        raise LoopKVError(f"unknown KV method {name!r} (known: {', '.join(sorted(METHODS))})") from None
    return cls(config, **kwargs)
