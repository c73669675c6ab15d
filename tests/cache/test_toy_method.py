"""A KV method is one file: a toy method defined here, registered from outside the package, is
configurable (the config accepts it in a Table 1 row), budgeted (its own rule gives its setting at a
ratio), served (a tiny model generates through it), evaluated (held-out KL against the teacher, as
`loopkv method-eval` scores a cell) and covered by every method-independent check
(tests/cache/method_checks.py), with no other file edited. Unregistered after each test.

The toy: final-loop reuse with its K/V quantised to 8 bits. A past token keeps only its last loop's
pre-RoPE K and V per layer, each (token, head) row as int8 codes with one float16 absmax scale; keys
are rotated to their positions on read. Bytes per token = 2 * D * H_kv * (d_head + 2).
"""
import copy
import math

import numpy as np
import pytest
import torch
import yaml

from cache_helpers import small_model, stream
from method_checks import CHECK, CHECKS, check_exemptions, teacher
from loopkv.analysis.calibration import capture_kv
from loopkv.cache import make_cache, register_method, unregister_method
from loopkv.cache.base import LoopCache, concat
from loopkv.cache.budget import CacheShape, setting_at_ratio
from loopkv.cache.registry import METHODS, budgeted_methods, codec_methods, read_path_methods

SCALE_DTYPE = torch.float16


class LastLoopInt8Cache(LoopCache):
    name = "toy_last_int8"
    label = "last-loop int8"
    not_checked = {"lossless": "its rows are quantised to 8 bits: lossy at its one setting"}

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        """T x fewer rows at 8 of `cache_bits` bits: T * cache_bits / 8 x (before the scales)."""
        nominal = shape.loops * cache_bits / 8
        return {"kwargs": {}, "ratio": nominal} if math.isclose(ratio, nominal, rel_tol=1e-3) else None

    def __init__(self, config):
        super().__init__(config)
        self.codes = {kind: [None] * self.num_layers for kind in "kv"}    # int8 (B, H, S, d), pre-RoPE
        self.scales = {kind: [None] * self.num_layers for kind in "kv"}   # float16 (B, H, S, 1)

    @staticmethod
    def quantise(x):
        scale = (x.abs().amax(-1, keepdim=True).float() / 127).clamp(min=2.0 ** -14).to(SCALE_DTYPE)
        return (x.float() / scale.float()).round().clamp(-127, 127).to(torch.int8), scale

    def _past(self, layer, dtype):
        if self.codes["k"][layer] is None:
            return None, None
        k, v = ((self.codes[kind][layer].float() * self.scales[kind][layer].float()).to(dtype) for kind in "kv")
        return self.rope(self.positions, k), v

    def update(self, loop, layer, positions, k, v):
        past_k, past_v = self._past(layer, k.dtype)       # before this forward's tokens are stored
        if loop == self.num_loops - 1:
            for kind, x in (("k", k), ("v", v)):
                codes, scale = self.quantise(x)
                self.codes[kind][layer] = concat(self.codes[kind][layer], codes)
                self.scales[kind][layer] = concat(self.scales[kind][layer], scale)
        new_k = self.rope(positions, k)
        if past_k is None:
            return new_k, v
        return torch.cat([past_k, new_k], dim=2), torch.cat([past_v, v], dim=2)

    def reconstruct(self, loop, layer, trace):
        out = []
        for kind in "kv":
            x = trace.kv(kind, self.num_loops - 1, layer)
            codes, scale = self.quantise(x)
            out.append((codes.float() * scale.float()).to(x.dtype))
        return tuple(out)

    def loop_bytes_per_token(self, dtype):
        return 2 * self.num_layers * self.num_kv_heads * (self.head_dim + SCALE_DTYPE.itemsize)

    def loop_tensors(self):
        return [t for store in (self.codes, self.scales) for kind in "kv" for t in store[kind] if t is not None]


@pytest.fixture
def toy():
    register_method(LastLoopInt8Cache)
    yield LastLoopInt8Cache
    unregister_method(LastLoopInt8Cache.name)
    assert LastLoopInt8Cache.name not in METHODS


def test_registering_adds_it_everywhere_the_methods_are_listed(toy):
    from loopkv.cache import settings
    from loopkv.report import tables

    assert METHODS[toy.name] is toy and toy.name in budgeted_methods()
    assert toy.name not in codec_methods() and toy.name not in read_path_methods()
    assert toy.name not in settings.CODEC_METHODS and toy.name not in settings.LAYOUT_OF_CODEC
    assert tables.fmt("method", toy.name) == "last-loop int8" and tables.METHOD_LABELS[toy.name] == toy.label


def test_a_duplicate_or_malformed_method_is_refused(toy):
    with pytest.raises(ValueError, match="already registered"):
        register_method(toy)
    with pytest.raises(ValueError, match="already registered"):
        register_method(type("AnotherLLA", (toy,), {"name": "lla"}))
    with pytest.raises(ValueError, match="name must match"):
        register_method(type("Bad", (toy,), {"name": "Bad-Name"}))
    with pytest.raises(ValueError, match="name must match"):
        register_method(type("Unnamed", (toy,), {}))            # a subclass inherits no name
    with pytest.raises(ValueError, match="no label"):
        register_method(type("Unlabelled", (toy,), {"name": "unlabelled", "label": ""}))
    with pytest.raises(ValueError, match="no budget rule"):
        register_method(type("NoRule", (LoopCache,), {"name": "no_rule", "label": "x", "update": toy.update,
                                                      "bytes_per_token": toy.bytes_per_token,
                                                      "cached_tensors": toy.cached_tensors}))
    with pytest.raises(ValueError, match="abstract"):
        register_method(type("Abstract", (LoopCache,), {"name": "abstract", "label": "x",
                                                        "setting_at_ratio": toy.setting_at_ratio}))
    with pytest.raises(ValueError, match="dotted paths"):
        register_method(type("BadKeys", (toy,), {"name": "bad_keys", "config_keys": ("toy_bits",)}))
    with pytest.raises(ValueError, match="builtin"):
        unregister_method("lla")


def test_it_is_configurable_in_a_table1_row(toy):
    from loopkv.config import load_config

    raw = yaml.safe_load(open("config/config.yaml"))
    T = raw["model"]["arch"]["total_ut_steps"]
    raw["methods"]["budgets"]["toy"] = 2.0 * T            # T x fewer rows, 8 of bf16's 16 bits
    raw["methods"]["table1"]["toy"] = [toy.name]
    assert load_config(raw)["methods"]["table1"]["toy"] == [toy.name]
    wrong = copy.deepcopy(raw)
    wrong["methods"]["table1"]["4x"] = [*wrong["methods"]["table1"]["4x"], toy.name]   # a ratio it cannot reach
    with pytest.raises(Exception, match="methods.table1.4x"):
        load_config(wrong)


def test_its_budget_rule_gives_its_setting(toy):
    from loopkv.cache.settings import configured_setting

    shape = CacheShape(layers=2, heads=4, loops=3, head_dim=16)
    assert setting_at_ratio(toy.name, shape, 6.0) == {"kwargs": {}, "ratio": 6.0}           # bf16 teacher
    assert setting_at_ratio(toy.name, shape, 12.0, cache_bits=32) == {"kwargs": {}, "ratio": 12.0}
    assert setting_at_ratio(toy.name, shape, 4.0) is None
    config = teacher().config
    methods_cfg = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"6x": 6.0}}
    setting = configured_setting(methods_cfg, toy.name, "6x", config)
    assert setting == {"method": toy.name, "kwargs": {}, "ratio": 6.0, "budget": "6x"}
    # what the ratio promises, against the teacher's bytes (its formula's scales on top)
    cache, full = make_cache(toy.name, config), make_cache("full", config)
    teacher_bf16 = full.bytes_per_token(torch.bfloat16)
    assert cache.bytes_per_token(torch.bfloat16) == 2 * 2 * 4 * (16 + 2)
    assert teacher_bf16 / cache.bytes_per_token(torch.bfloat16) == pytest.approx(6.0 * 16 / 18)


def test_it_stores_the_int8_rows_of_the_last_loop(toy):
    """The explicit reference of what the toy keeps: after one forward (every token's K/V exact), each
    layer's codes and scales are the absmax int8 quantisation of the teacher's last-loop K/V."""
    model = teacher(torch.float32)                          # capture_kv gives float32 K/V
    tokens = torch.randint(3, 61, (2, 6), generator=torch.Generator().manual_seed(3))
    cache = make_cache(toy.name, model.config)
    with torch.no_grad():
        model(tokens, cache=cache)
    k, v = capture_kv(model, tokens)                       # (B, L, D, H, T, d), float32
    for layer in range(model.config.num_hidden_layers):
        for kind, x in (("k", k), ("v", v)):
            last = x[:, :, layer, :, -1].numpy()            # (B, L, H, d) float32
            scale = np.maximum(np.abs(last).max(-1, keepdims=True) / np.float32(127), np.float32(2.0 ** -14))
            scale = scale.astype(np.float16)
            codes = np.clip(np.round(last / scale.astype(np.float32)), -127, 127).astype(np.int8)
            np.testing.assert_array_equal(cache.codes[kind][layer].transpose(1, 2).numpy(), codes)
            np.testing.assert_array_equal(cache.scales[kind][layer].transpose(1, 2).numpy(), scale)


def test_a_model_generates_through_it(toy):
    from loopkv.cache.settings import cache_factory
    from loopkv.eval.generation import greedy_generate

    model = teacher()
    factory = cache_factory({"method": toy.name, "kwargs": {}}, model.config)
    prompts = [[5, 9, 11, 4, 7], [8, 3]]
    out = greedy_generate(model, prompts, 6, batch_size=2, cache_factory=factory, eos_id=-1)
    assert [len(o) for o in out] == [6, 6]
    # each generated token is the argmax of streaming the prompt and the tokens before it through the toy
    for prompt, new in zip(prompts, out):
        ids = torch.tensor([prompt + new])
        logits = stream(model, factory(), ids, prefill=len(prompt))
        assert logits[0, len(prompt) - 1:-1].argmax(-1).tolist() == new
    ids = torch.tensor([prompts[0] + out[0]])           # and it is not the teacher's cache
    exact = model(ids, use_cache=False).logits
    assert (stream(model, factory(), ids, prefill=1) - exact).abs().max() > 1e-3


def test_it_is_scored_as_method_eval_scores_a_cell(toy):
    """Held-out fidelity to the teacher (eval/fidelity.py, what `loopkv method-eval` reports): the toy
    loses some, the teacher's own cache none."""
    from loopkv.cache.settings import cache_factory
    from loopkv.eval.fidelity import teacher_fidelity

    model = small_model(loops=3, layers=2, heads=4, head_dim=16)
    windows = torch.randint(3, 61, (4, 12), generator=torch.Generator().manual_seed(4))
    got = teacher_fidelity(model, windows, 2, cache_factory({"method": toy.name, "kwargs": {}}, model.config))
    reference = teacher_fidelity(model, windows, 2, cache_factory({"method": "full", "kwargs": {}}, model.config))
    assert reference["kl"] < 1e-6 and got["kl"] > 1e-4 and 0.0 <= got["top1"] <= 1.0
    assert got["n_tokens"] == 4 * 11


@pytest.mark.parametrize("check", [c for c in CHECKS if c not in LastLoopInt8Cache.not_checked])
def test_the_checks_every_method_runs(toy, check):
    CHECK[check](toy.name, None)


def test_what_it_does_not_check_is_stated_and_true(toy):
    check_exemptions(toy.name)
