"""Equal cache budgets: the setting of each KV method that stores `ratio` times fewer bytes per
token than the teacher's full per-loop cache (LLA Table 1 compares methods this way).

Teacher: 2 * T * D * H * d_head values per token at `cache_bits` bits (bf16 = 16 at paper scale).
A method that cannot reach a ratio (cla spans, quantiser bit widths, final-loop reuse = T) gets
None; a latent width that is not an integer is rounded and the achieved ratio is reported.
K/V rank split: LLA's default 96/160 (k_share 0.375) gives V more capacity than K.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from loopkv.cache.kv_quant import BITS


@dataclass(frozen=True)
class CacheShape:
    layers: int
    heads: int
    loops: int
    head_dim: int

    @classmethod
    def of(cls, config) -> "CacheShape":
        return cls(config.num_hidden_layers, config.num_key_value_heads, config.total_ut_steps, config.head_dim)

    @property
    def teacher_values(self) -> int:
        return 2 * self.loops * self.layers * self.heads * self.head_dim


def _ranks(values_per_codec: float, k_share: float) -> dict | None:
    total = round(values_per_codec)
    if total < 2:
        return None
    rank_k = max(1, round(total * k_share))
    return {"rank_k": rank_k, "rank_v": total - rank_k}


def setting_at_ratio(method: str, shape: CacheShape, ratio: float, cache_bits: int = 16,
                     k_share: float = 0.375) -> dict | None:
    """{"kwargs": ..., "ratio": achieved} for `method` at `ratio`, or None if unreachable."""
    T, D, H, d = shape.loops, shape.layers, shape.heads, shape.head_dim
    if method in ("lla", "lla2d", "mla_head"):
        codecs = {"lla": D * H, "lla2d": D, "mla_head": T * D}[method]
        ranks = _ranks(shape.teacher_values / ratio / codecs, k_share)
        if ranks is None:
            return None
        return {"kwargs": ranks, "ratio": shape.teacher_values / (codecs * (ranks["rank_k"] + ranks["rank_v"]))}
    if method == "cla":
        for span in range(1, D + 1):
            achieved = D / math.ceil(D / span)
            if math.isclose(achieved, ratio, rel_tol=1e-3):
                return {"kwargs": {"span": span}, "ratio": achieved}
        return None
    if method == "kv_quant":
        bits = cache_bits / ratio
        if any(math.isclose(bits, b, rel_tol=1e-2) for b in BITS):
            bits = min(BITS, key=lambda b: abs(b - bits))
            return {"kwargs": {"bits": bits}, "ratio": cache_bits / bits}   # before scale/zero overhead
        return None
    if method == "full":   # the teacher's own cache: the 1x reference
        return {"kwargs": {}, "ratio": 1.0} if math.isclose(ratio, 1.0) else None
    if method in ("final_loop", "melt"):   # one row per token and layer: T x fewer than the teacher
        return {"kwargs": {}, "ratio": float(T)} if math.isclose(ratio, T, rel_tol=1e-3) else None
    raise ValueError(f"no budget rule for method {method!r}")
