"""Huginn's attention through the LoopCache interface: core layers as (step, layer), prelude and coda
as the cache's non-looped layers; the full cache stores P + steps * R + C entries per token, sized by
the steps actually run; a compressing cache, laid out for the config's steps, refuses any other count."""
import inspect
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import held_bytes  # noqa: E402

import loopkv.models.modeling_huginn  # noqa: E402,F401  (registers model type "huginn_raven")
from loopkv.cache import make_cache  # noqa: E402
from loopkv.cache.full import FullLoopCache  # noqa: E402
from loopkv.cache.registry import METHODS  # noqa: E402
from loopkv.errors import LoopKVError  # noqa: E402

HUGINN = Path(__file__).parents[1] / "fixtures" / "huginn-tiny-reference"
P, R, C, H, D_HEAD = 1, 2, 1, 4, 16


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(HUGINN).eval()


def tokens(batch=2, n=7, seed=0):
    return torch.randint(0, 256, (batch, n), generator=torch.Generator().manual_seed(seed))


class RecordingCache(FullLoopCache):
    """The full cache, recording which key each attention call uses."""

    def __init__(self, config):
        super().__init__(config)
        self.calls = []

    def attend(self, loop, layer, positions, q, k, v, mask):
        self.calls.append(("loop", loop, layer))
        return super().attend(loop, layer, positions, q, k, v, mask)

    def attend_outer(self, layer, positions, q, k, v, mask):
        self.calls.append(("outer", layer))
        return super().attend_outer(layer, positions, q, k, v, mask)


def test_attention_goes_through_the_cache_with_one_key_per_layer_and_step(model):
    cache = RecordingCache(model.config)
    with torch.no_grad():
        model(tokens(), num_steps=3, init_scale=0.0, cache=cache)
    core = [("loop", t, j) for t in range(3) for j in range(R)]
    assert cache.calls == [("outer", 0)] + core + [("outer", P)]


@pytest.mark.parametrize("steps", [2, 4, 8])   # fewer than, as many as, more than mean_recurrence
def test_full_cache_stores_prelude_steps_times_core_and_coda_entries(model, steps):
    cache = make_cache("full", model.config)
    with torch.no_grad():
        model(tokens(n=6), num_steps=steps, init_scale=0.0, cache=cache)
        model(tokens(n=1, seed=1), num_steps=steps, init_scale=0.0, cache=cache)
    entries = P + steps * R + C
    per_token = 2 * entries * H * D_HEAD * 4   # K and V, float32
    assert len(cache.cached_tensors()) == 2 * entries
    assert held_bytes(cache) == cache.allocated_bytes() == per_token * 2 * 7   # batch 2, 7 tokens
    assert cache.bytes_per_token(torch.float32) == per_token


def test_a_forward_running_other_steps_than_the_cached_tokens_is_refused(model):
    for later in (2, 8):
        cache = make_cache("full", model.config)
        with torch.no_grad():
            model(tokens(), num_steps=4, init_scale=0.0, cache=cache)
            with pytest.raises(LoopKVError, match="same number of loops|as many|built for"):
                model(tokens(n=1), num_steps=later, init_scale=0.0, cache=cache)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "full" and not METHODS[m].outer_layers_refused])
def test_a_compressing_cache_refuses_a_forward_of_other_steps_than_it_is_built_for(method):
    from method_checks import LOOPS, served, teacher, variants

    model, factory, _ = served(method, variants([method])[0][1], teacher(family="huginn"))
    for steps in (LOOPS - 1, LOOPS + 1):
        with torch.no_grad(), pytest.raises(LoopKVError, match=f"built for {LOOPS} loops"):
            model(tokens(n=3, seed=2) % 64, num_steps=steps, init_scale=0.0, cache=factory())
