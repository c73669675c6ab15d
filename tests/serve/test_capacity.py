"""Capacity search: the batch it returns fits the budget and one more row does not, on real CPU
tensors and on the meta device (paper scale), and compression buys batch in proportion."""
import pytest
import torch

from loopkv.serve.capacity import cache_probe, capacity, max_batch
from loopkv.serve.footprint import served_setting
from test_footprint import METHODS_CFG, TINY, ouro


@pytest.mark.parametrize("edge", [1, 2, 3, 7, 64, 1000])
def test_search_finds_the_edge_of_a_monotone_predicate(edge):
    calls = []
    assert max_batch(lambda b: calls.append(b) or b <= edge) == edge
    assert len(calls) <= 2 * edge.bit_length() + 2


def test_nothing_fits_and_the_limit():
    assert max_batch(lambda b: False) == 0
    assert max_batch(lambda b: True, limit=100) == 100


@pytest.mark.parametrize("method,budget,read_path", [("full", "1x", None), ("lla", "4x", "fused"),
                                                     ("kv_quant", "4x", None), ("melt", "4x", None)])
def test_the_batch_found_fits_and_one_more_does_not(method, budget, read_path):
    setting = served_setting(method, budget, METHODS_CFG, TINY)
    weights, budget_bytes, context = 1_000_000, 12_000_000, 96
    result = capacity(setting, TINY, context, budget_bytes, weights, read_path=read_path)
    fits = cache_probe(setting, TINY, context, budget_bytes, weights, read_path=read_path)
    best = result["max_batch"]
    assert best > 0 and fits(best) and not fits(best + 1)
    assert weights + result["cache_bytes_at_max"] <= budget_bytes


def test_capacity_ratio_follows_compression_at_ouro_1p4b_on_meta():
    config = ouro(24)
    budget, weights, context = 141 * 10**9, 2 * 1_400_000_000, 4096
    batch = {(m, b): capacity(served_setting(m, b, METHODS_CFG, config), config, context, budget, weights,
                              dtype=torch.bfloat16, device="meta", read_path="fused" if m == "lla" else None)["max_batch"]
             for m, b in (("full", "1x"), ("lla", "4x"), ("lla", "21.33x"))}
    teacher = batch["full", "1x"]
    assert teacher == (budget - weights) // (768 * 1024 * context)
    assert batch["lla", "4x"] >= 0.9 * 4 * teacher
    assert batch["lla", "21.33x"] >= 0.9 * 21.33 * teacher


@pytest.mark.parametrize("edge,guess", [(10, 10), (10, 3), (10, 40), (1, 5), (0, 5), (100, 99)])
def test_a_guess_is_verified_not_trusted(edge, guess):
    assert max_batch(lambda b: b <= edge, guess=guess) == edge


@pytest.mark.parametrize("method,budget,read_path", [("full", "1x", None), ("lla", "4x", "fused"), ("lla", "4x", "full"),
                                                     ("lla", "4x", "latent"), ("kv_quant", "4x", None),
                                                     ("melt", "4x", None)])
def test_a_probes_cache_is_freed_with_its_last_reference_and_no_collection_runs(method, budget, read_path, monkeypatch):
    # what lets a CPU or meta probe skip gc.collect (a quarter second each): the cache holds no reference
    # cycle, so its tensors go when the probe drops it
    import gc
    import weakref

    from loopkv.serve import capacity as capacity_module
    from loopkv.serve.footprint import fill_cache, served_cache

    setting = served_setting(method, budget, METHODS_CFG, TINY)
    cache = fill_cache(served_cache(setting, TINY, read_path=read_path, device="cpu", dtype=torch.float32),
                       2, 40, torch.float32, "cpu", seed=0, random=False)
    gc.disable()
    try:
        freed = weakref.ref(cache)
        del cache
        assert freed() is None
    finally:
        gc.enable()
    collections = []
    monkeypatch.setattr(capacity_module.gc, "collect", lambda *a: collections.append(a) or 0)
    for device in ("cpu", "meta"):
        cache_probe(setting, TINY, 40, 12_000_000, 1_000_000, device=device, read_path=read_path)(3)
    assert collections == []
