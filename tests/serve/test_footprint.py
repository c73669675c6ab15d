"""Bytes per token: every method's formula equals what its cache allocates (tiny config, real
tensors; Ouro-1.4B / 2.6B on the meta device), and Ouro-1.4B gives the paper's 768 / 192 / 36 KiB."""
import pytest
import torch

from loopkv.cache.budget import CacheShape
from loopkv.cache.registry import METHODS
from loopkv.models import OuroConfig
from loopkv.serve.footprint import fill_cache, footprint, served_cache, served_setting

TINY = OuroConfig(vocab_size=300, hidden_size=128, num_hidden_layers=4, total_ut_steps=4, num_attention_heads=4,
                  num_key_value_heads=4, head_dim=32, intermediate_size=512, max_position_embeddings=1024)
METHODS_CFG = {"budgets": {"4x": 4.0, "5.33x": 5.333333, "21.33x": 21.333333}, "cache_dtype": "bfloat16",
               "k_share": 0.375, "kv_quant_group": 32, "rope_share": 0.25, "query_adapter": False}
# every registered method at every budget it reaches on TINY, each read path
CELLS = [(m, b, path) for m, cls in METHODS.items() for b, ratio in {"1x": 1.0, **METHODS_CFG["budgets"]}.items()
         if cls.setting_at_ratio(CacheShape.of(TINY), ratio, 16) is not None for path in (cls.read_paths or (None,))]


def ouro(layers):
    return OuroConfig(vocab_size=49152, hidden_size=2048, num_hidden_layers=layers, total_ut_steps=4,
                      num_attention_heads=16, num_key_value_heads=16, head_dim=128, intermediate_size=5632,
                      rope_theta=1e6)


@pytest.mark.parametrize("method,budget,read_path", CELLS)
def test_formula_equals_allocation_on_real_tensors(method, budget, read_path):
    row = footprint(served_setting(method, budget, METHODS_CFG, TINY), TINY, torch.bfloat16, read_path=read_path)
    assert row["allocated_bytes_per_token"] == row["formula_bytes_per_token_compute_dtype"]


@pytest.mark.parametrize("layers,want_kib", [(24, {"1x": 768, "4x": 192, "21.33x": 36}),
                                              (48, {"1x": 1536, "4x": 384, "21.33x": 72})])
def test_ouro_paper_configs_on_the_meta_device(layers, want_kib):
    config = ouro(layers)
    for method, budget in (("full", "1x"), ("lla", "4x"), ("lla", "21.33x")):
        row = footprint(served_setting(method, budget, METHODS_CFG, config), config, torch.bfloat16,
                        torch.bfloat16, device="meta", read_path="fused" if method == "lla" else None)
        assert row["bytes_per_token"] == want_kib[budget] * 1024
        assert row["allocated_bytes_per_token"] == row["bytes_per_token"]       # bf16 compute = cache dtype


def test_filling_twice_appends():
    cache = served_cache(served_setting("lla", "4x", METHODS_CFG, TINY), TINY, read_path="latent")
    fill_cache(cache, 2, 5)
    fill_cache(cache, 2, 3)
    assert cache.get_seq_length() == 8
    assert cache.allocated_bytes() == 2 * 8 * cache.bytes_per_token(torch.float32)
