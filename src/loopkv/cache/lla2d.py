"""`lla2d`: LLA with the head axis joined too: one K latent and one V latent per (token, layer),
encoding x = [heads, loops, d_head] (width H*T*d_head). Otherwise the same cache as `lla` (same
encode-after-last-loop rule, same read paths).

Bytes per token (latent read path) = D * (r_k + r_v) * bytes(dtype).
"""
from __future__ import annotations

from loopkv.cache.lla import LLACache


class LLA2DCache(LLACache):
    name = "lla2d"
    label = "LLA-2D"
    layout = "joint_heads"
