"""Equal-budget settings reproduce the paper's configurations and byte counts."""
import math

import pytest
import torch

from loopkv.cache.budget import CacheShape, setting_at_ratio
from loopkv.cache.latent_codec import LAYOUTS, LatentCodec
from loopkv.cache.registry import codec_methods

OURO_1P4B = CacheShape(layers=24, heads=16, loops=4, head_dim=128)
TINY = CacheShape(layers=4, heads=4, loops=4, head_dim=32)


def test_ouro_1p4b_settings_match_the_paper():
    assert setting_at_ratio("lla", OURO_1P4B, 4)["kwargs"] == {"rank_k": 96, "rank_v": 160}
    assert setting_at_ratio("kv_quant", OURO_1P4B, 4)["kwargs"] == {"bits": 4}
    assert setting_at_ratio("kv_quant", OURO_1P4B, 16 / 3)["kwargs"] == {"bits": 3}
    assert [setting_at_ratio("cla", OURO_1P4B, r)["kwargs"]["span"] for r in (4, 6, 12, 24)] == [4, 6, 12, 24]
    assert setting_at_ratio("final_loop", OURO_1P4B, 4)["ratio"] == 4.0
    # 21.33x: 36 KiB per token in bf16, the paper's Table 5
    lla = setting_at_ratio("lla", OURO_1P4B, 21.33)
    assert lla["kwargs"]["rank_k"] + lla["kwargs"]["rank_v"] == 48
    codec = LatentCodec({"layer": 24, "head": 16, "loop": 4, "dim": 128}, LAYOUTS["per_head"],
                        {"k": lla["kwargs"]["rank_k"], "v": lla["kwargs"]["rank_v"]}).to("meta")
    assert codec.bytes_per_token(torch.bfloat16) == 36 * 1024


@pytest.mark.parametrize("method", codec_methods())
@pytest.mark.parametrize("ratio", [4, 16 / 3, 64 / 3])
def test_latent_methods_hit_the_ratio_on_the_tiny_model(method, ratio):
    setting = setting_at_ratio(method, TINY, ratio)
    assert math.isclose(setting["ratio"], ratio, rel_tol=1e-9)
    assert setting["kwargs"]["rank_k"] < setting["kwargs"]["rank_v"]


def test_unreachable_settings_are_none():
    assert setting_at_ratio("cla", TINY, 16 / 3) is None          # D=4 shares 1, 2 or 4 layers
    assert setting_at_ratio("kv_quant", TINY, 4, cache_bits=32) == {"kwargs": {"bits": 8}, "ratio": 4.0}
    assert setting_at_ratio("kv_quant", TINY, 16 / 3, cache_bits=32) is None   # 6 bits: no such quantiser
    assert setting_at_ratio("final_loop", TINY, 16 / 3) is None
    assert setting_at_ratio("melt", TINY, 16 / 3) is None                       # one row per layer: T x only
    assert setting_at_ratio("melt", TINY, TINY.loops) == {"kwargs": {}, "ratio": float(TINY.loops)}
    with pytest.raises(ValueError, match="no budget rule"):
        setting_at_ratio("h2o", TINY, 4)


def test_lossless_settings_are_the_full_widths():
    """A codec at the full width of its layout's vectors reconstructs them: Ouro-1.4B's T*d_head per
    (layer, head) for LLA, H*T*d_head per layer for LLA-2D, H*d_head per (layer, loop) for mla_head."""
    from loopkv.cache.registry import METHODS

    assert METHODS["lla"].lossless_setting(OURO_1P4B) == {"rank_k": 4 * 128, "rank_v": 4 * 128}
    assert METHODS["lla2d"].lossless_setting(OURO_1P4B) == {"rank_k": 16 * 4 * 128, "rank_v": 16 * 4 * 128}
    assert METHODS["mla_head"].lossless_setting(OURO_1P4B) == {"rank_k": 16 * 128, "rank_v": 16 * 128}
    assert METHODS["cla"].lossless_setting(OURO_1P4B) == {"span": 1} and METHODS["full"].lossless_setting(TINY) == {}
    assert METHODS["final_loop"].lossless_setting(TINY) is None
    assert METHODS["final_loop"].lossless_setting(CacheShape(layers=4, heads=4, loops=1, head_dim=32)) == {}
