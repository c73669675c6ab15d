"""Equal cache budgets: the setting of each KV method that stores `ratio` times fewer bytes per
token than the teacher's full per-loop cache (LLA Table 1 compares methods this way).

Teacher: 2 * T * D * H * d_head values per token at `cache_bits` bits (bf16 = 16 at paper scale),
over the looped layers: a ratio is of the looped K/V, the axis the methods compress (LLA Table 3's
Huginn ratios are 2 * T * d_head / (r_k + r_v)). A model's non-looped layers (Huginn's prelude and
coda, `outer_layers`) are stored exact by every method, on top (`outer_values`).
Each method states its own budget rule (`setting_at_ratio` on its class); this module holds what
the rules share: the cache's shape, and the latent width of a codec method at a ratio with its K/V
rank split. A method that cannot reach a ratio (cla spans, quantiser bit widths, final-loop reuse =
T) gets None; a latent width that is not an integer is rounded and the achieved ratio is reported.
K/V rank split: LLA's default 96/160 (k_share 0.375) gives V more capacity than K.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheShape:
    layers: int
    heads: int
    loops: int
    head_dim: int
    outer_layers: int = 0   # non-looped layers (stored exact by every method)

    @classmethod
    def of(cls, config) -> "CacheShape":
        return cls(config.num_hidden_layers, config.num_key_value_heads, config.total_ut_steps, config.head_dim,
                   getattr(config, "num_outer_layers", 0))

    @property
    def teacher_values(self) -> int:
        """The teacher's looped K/V values per token: what a ratio divides."""
        return 2 * self.loops * self.layers * self.heads * self.head_dim

    @property
    def outer_values(self) -> int:
        """The non-looped layers' K/V values per token, the same in every method."""
        return 2 * self.outer_layers * self.heads * self.head_dim

    @property
    def sizes(self) -> dict[str, int]:
        """The axis sizes in a codec's terms (latent_codec.model_sizes)."""
        return {"layer": self.layers, "head": self.heads, "loop": self.loops, "dim": self.head_dim}

    def codec_groups(self, groups: tuple[str, ...]) -> int:
        """How many codecs a layout indexed by `groups` has (e.g. (layer, head): D * H)."""
        return math.prod(self.sizes[a] for a in groups)

    def codec_width(self, groups: tuple[str, ...]) -> int:
        """The width of one codec's vector: the product of the axes not indexing codecs."""
        return math.prod(size for axis, size in self.sizes.items() if axis not in groups)


def _ranks(values_per_codec: float, k_share: float) -> dict | None:
    total = round(values_per_codec)
    if total < 2:
        return None
    rank_k = max(1, round(total * k_share))
    return {"rank_k": rank_k, "rank_v": total - rank_k}


def latent_setting(shape: CacheShape, groups: tuple[str, ...], ratio: float, k_share: float) -> dict | None:
    """The budget rule of a codec method whose codecs are indexed by `groups`: each stores r_k + r_v
    values per token, so r_k + r_v = teacher values / ratio / codecs, split by `k_share`; None where
    a rank would exceed the codec's width (a ratio too small for a latent, e.g. 1x)."""
    codecs = shape.codec_groups(groups)
    ranks = _ranks(shape.teacher_values / ratio / codecs, k_share)
    if ranks is None or max(ranks.values()) > shape.codec_width(groups):
        return None
    return {"kwargs": ranks, "ratio": shape.teacher_values / (codecs * (ranks["rank_k"] + ranks["rank_v"]))}


def full_rank_setting(shape: CacheShape, groups: tuple[str, ...]) -> dict:
    """Ranks equal to the codec's width: a lossless codec (any orthonormal basis reconstructs x)."""
    width = shape.codec_width(groups)
    return {"rank_k": width, "rank_v": width}


def setting_at_ratio(method: str, shape: CacheShape, ratio: float, cache_bits: int = 16,
                     k_share: float = 0.375) -> dict | None:
    """{"kwargs": ..., "ratio": achieved} for `method` at `ratio`, or None if unreachable: the
    method's own rule (its class's `setting_at_ratio`)."""
    from loopkv.cache.registry import METHODS

    if method not in METHODS:
        raise ValueError(f"no budget rule for method {method!r} (known: {', '.join(sorted(METHODS))})")
    return METHODS[method].setting_at_ratio(shape, ratio, cache_bits, k_share)


def one_row_setting(shape: CacheShape, ratio: float) -> dict | None:
    """The rule of a method that keeps one row per token and layer (final_loop, melt): T x fewer
    bytes than the teacher, and no other ratio."""
    loops = float(shape.loops)
    return {"kwargs": {}, "ratio": loops} if math.isclose(ratio, loops, rel_tol=1e-3) else None


class LatentBudget:
    """The budget rules of a codec method (mix in before LoopCache): ranks of its layout's latents
    at a ratio, full ranks for its lossless setting."""

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        from loopkv.cache.latent_codec import LAYOUTS

        return latent_setting(shape, LAYOUTS[cls.layout], ratio, k_share)

    @classmethod
    def lossless_setting(cls, shape):
        from loopkv.cache.latent_codec import LAYOUTS

        return full_rank_setting(shape, LAYOUTS[cls.layout])

