"""The checks every registered KV method goes through, whatever it is (tests/cache/test_every_method.py
runs them over the registry; tests/cache/test_toy_method.py on a method a test registers).

Every check runs on each model family (FAMILIES): a small random Ouro, and a small random Huginn whose
prelude and coda are non-looped layers and whose core's steps are the loop axis. A method that does not
serve a family is refused when its cache is built (checked in test_every_method.py); a check a family's
model cannot run is stated, with why, in FAMILY_NOT_CHECKED.

Each check builds the method the way loopkv serves it: its setting from its own budget rule through
the config path (settings.configured_setting at the first budget of METHODS_CFG it reaches), its model
(`untrained_model`: the teacher, or a model variant's own), a codec for codec methods (random
orthonormal directions, an SVD initialisation's form), each of its read paths. A check that does not
apply to a method is named, with why, in the class's `not_checked`; nothing here lists methods.

- lossless: at the method's lossless setting, streaming decode gives the logits an independent
  implementation computed for the family's reference checkpoint (tests/fixtures/ouro-tiny-reference:
  an MLX port of Ouro; tests/fixtures/huginn-tiny-reference: the Huginn authors' code, zero initial state).
- bytes: the formula (bytes_per_token) times batch x tokens equals the bytes of every tensor the cache
  object holds after streaming, counted from its attributes (cache_helpers.held_bytes), and the
  method's own count (allocated_bytes).
- teacher_forced: the parallel view (cache/teacher_forced.py), fed its own K/V back L times, equals
  streaming decode, and the method really changes the teacher's output when it compresses.
- batch: a row's logits (prompt prefill and decoded tokens) are the same in a batch of other rows of
  its length as alone;
- padding: and the same in a left-padded batch of rows of other lengths.
- rows: prompts prefilled once, the cache's rows then selected with repeats and drops
  (`reorder_cache`: one context serving several continuations, beam search), and continuations
  streamed, give what prefilling the selected prompts directly and streaming the same gives.
A check a method is known to fail (its class's `known_failures`: a defect to fix) is expected to fail,
strictly: once fixed, the entry must go.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cache_helpers import held_bytes, random_codec, small_huginn, small_model, stream, stream_padded
from loopkv.cache import make_cache
from loopkv.cache.budget import CacheShape
from loopkv.cache.registry import METHODS, method_class
from loopkv.cache.settings import cache_factory, configured_setting
from loopkv.cache.teacher_forced import teacher_forced_forward
from loopkv.errors import LoopKVError

CHECKS = ("lossless", "bytes", "teacher_forced", "batch", "padding", "rows")
LOOPS, LAYERS, HEADS, HEAD_DIM = 3, 2, 4, 16    # head_dim % 8 == 0: kv_quant packs codes
# budgets tried in this order for a method's compressed setting (the teacher's is 1x); 3x and 6x are
# T and 2T on the test model (final-loop reuse, MELT)
METHODS_CFG = {"cache_dtype": "bfloat16", "k_share": 0.375, "kv_quant_group": 4, "read_path": "latent",
               "rope_share": 0.25, "query_adapter": True,
               "budgets": {"4x": 4.0, "3x": 3.0, "2x": 2.0, "6x": 6.0, "8x": 8.0}}
# float64 models; attention the method computes in float32 (LLA's fused read) is compared at float32's
# round-off through the model: per call it is ~3e-7 in both families (test_lla.py), through the model
# 3e-5 (Ouro) and 5e-4 (Huginn, measured: its blocks re-normalise the stream itself, and its state
# starts from zero), so float32 is given per family
TOLERANCE = {torch.float64: 1e-8, (torch.float32, "ouro"): 2e-4, (torch.float32, "huginn"): 2e-3}

FAMILIES = ("ouro", "huginn")
# each family's forward arguments: Huginn from the zero initial state (its default start is random)
FORWARD = {"ouro": {}, "huginn": {"init_scale": 0.0}}
FAMILY_NOT_CHECKED: dict[str, dict[str, str]] = {}   # family -> {check: why it cannot run there}
# the reference outputs the lossless check compares with, per family: (fixture file key)
REFERENCE_LOGITS = {"ouro": "logits_final", "huginn": "logits_zero_state"}


def variants(names=None) -> list[tuple[str, str | None]]:
    """(method, read path) of every registered method (or of `names`), each read path separately."""
    return [(name, path) for name in (names or METHODS) for path in (METHODS[name].read_paths or (None,))]


def serves(name: str, family: str) -> bool:
    """Whether the method serves the family's models (a method without non-looped layers refuses Huginn)."""
    return family != "huginn" or not METHODS[name].outer_layers_refused


def cases(check: str, names=None, families=FAMILIES) -> list:
    """pytest params (family, method, read path) of the variants `check` applies to (not named in their
    class's not_checked nor the family's FAMILY_NOT_CHECKED, the method serving the family); a known
    failure is a strict xfail with the class's reason."""
    params = []
    for family in families:
        if check in FAMILY_NOT_CHECKED.get(family, {}):
            continue
        for name, path in variants(names):
            cls = METHODS[name]
            if check in cls.not_checked or not serves(name, family):
                continue
            marks = ([pytest.mark.xfail(strict=True, reason=f"{name}: {cls.known_failures[check]}")]
                     if check in cls.known_failures else [])
            params.append(pytest.param(family, name, path, id=f"{family}-{name}" + (f"-{path}" if path else ""),
                                       marks=marks))
    return params


def teacher(dtype=torch.float64, family: str = "ouro"):
    build = small_huginn if family == "huginn" else small_model
    size = {"layers": LAYERS, "heads": HEADS, "head_dim": HEAD_DIM}
    size["steps" if family == "huginn" else "loops"] = LOOPS
    return build(**size).to(dtype)


def compressed_setting(name: str, config) -> dict:
    """The method's setting at the first budget of METHODS_CFG it reaches, else 1x (the teacher's)."""
    for budget in (*METHODS_CFG["budgets"], "1x"):
        try:
            return configured_setting(METHODS_CFG, name, budget, config)
        except LoopKVError:
            continue
    raise AssertionError(f"{name} reaches none of the budgets {list(METHODS_CFG['budgets'])} or 1x on the test "
                         f"model (T={config.total_ut_steps}, D={config.num_hidden_layers}): add one it reaches")


def served(name: str, read_path, base, setting: dict | None = None, seed: int = 0):
    """(model, cache factory, setting) of `name` on the teacher `base`, as served."""
    cls = method_class(name)
    model = cls.untrained_model(base)
    setting = setting or compressed_setting(name, model.config)
    codec = random_codec(setting, model.config, seed, dtype=model.dtype) if cls.layout is not None else None
    return model, cache_factory(setting, model.config, codec, read_path=read_path), setting


def tolerance(model, read_path, family: str = "ouro") -> float:
    """Float64 round-off, unless the method computes attention in float32 (LLA's fused read)."""
    return TOLERANCE[(torch.float32, family) if read_path == "fused" else model.dtype]


# -- the checks --------------------------------------------------------------------------------
def check_lossless(name: str, read_path, reference_model, reference_dir, family: str = "ouro") -> None:
    cls = method_class(name)
    config = reference_model.config
    kwargs = cls.lossless_setting(CacheShape.of(config))
    assert kwargs is not None, f"{name} has no lossless setting here: state why in its class's not_checked['lossless']"
    expected = np.load(reference_dir / "expected.npz")
    tokens = torch.tensor(expected["tokens"])
    setting = {"method": name, "kwargs": kwargs}
    model, factory, _ = served(name, read_path, reference_model, setting)
    got = stream(model, factory(), tokens, prefill=4, **FORWARD[family])
    np.testing.assert_allclose(got.float().numpy(), expected[REFERENCE_LOGITS[family]], atol=1e-4, rtol=0)


def check_bytes(name: str, read_path, family: str = "ouro") -> None:
    model, factory, _ = served(name, read_path, teacher(family=family))
    cache = factory()
    batch, tokens = 2, 8        # prefill 4, decode 4: whole kv_quant key groups of 4
    stream(model, cache, torch.randint(3, 61, (batch, tokens), generator=torch.Generator().manual_seed(0)), prefill=4,
           **FORWARD[family])
    formula = cache.bytes_per_token(model.dtype)
    assert held_bytes(cache) == formula * batch * tokens
    assert cache.allocated_bytes() == formula * batch * tokens


def check_teacher_forced(name: str, read_path, family: str = "ouro") -> None:
    base = teacher(family=family)
    model, factory, setting = served(name, read_path, base)
    forward = FORWARD[family]
    tokens = torch.randint(3, 61, (2, 7), generator=torch.Generator().manual_seed(1))
    streamed = stream(model, factory(), tokens, prefill=1, **forward)
    with torch.no_grad():
        exact = model(tokens, use_cache=False, **forward).logits
        _, source = teacher_forced_forward(model, tokens, make_cache("full", model.config), **forward)
        for _ in range(tokens.shape[1]):   # token i's K/V are final once tokens < i are: exact after L passes
            out, source = teacher_forced_forward(model, tokens, factory(), source, **forward)
    if setting["ratio"] > 1:
        assert (streamed - exact).abs().max() > 1e-2, "the method at a compressed setting should change the output"
    torch.testing.assert_close(out.logits, streamed, atol=tolerance(model, read_path, family), rtol=0)


def check_batch(name: str, read_path, family: str = "ouro", lengths=(5, 5, 5)) -> None:
    model, factory, _ = served(name, read_path, teacher(family=family))
    forward = FORWARD[family]
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in lengths]
    continuations = [torch.randint(3, 61, (4,), generator=g).tolist() for _ in prompts]
    batched = stream_padded(model, factory(), prompts, continuations, **forward)
    for i, (p, c) in enumerate(zip(prompts, continuations)):
        alone = stream_padded(model, factory(), [p], [c], **forward)[0]
        torch.testing.assert_close(batched[i], alone, atol=tolerance(model, read_path, family), rtol=0,
                                   msg=lambda m, i=i: f"row {i} in a padded batch differs from alone: {m}")


def check_padding(name: str, read_path, family: str = "ouro") -> None:
    check_batch(name, read_path, family, lengths=(6, 2, 5))   # 0, 4 and 1 left pads


def check_rows(name: str, read_path, family: str = "ouro") -> None:
    model, factory, _ = served(name, read_path, teacher(family=family))
    forward = FORWARD[family]
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 61, (6,), generator=g).tolist() for _ in range(3)]
    index = [2, 0, 2, 2]   # row 1 dropped, row 2 three times
    continuations = [torch.randint(3, 61, (4,), generator=g).tolist() for _ in index]
    cache = factory()
    with torch.no_grad():
        prefill = model(torch.tensor(prompts), cache=cache, **forward).logits
        cache.reorder_cache(torch.tensor(index))
        shared = [[prefill[i, -1:]] for i in index]
        for j in range(4):
            step = model(torch.tensor([[c[j]] for c in continuations]), cache=cache, **forward).logits
            for row in range(len(index)):
                shared[row].append(step[row])
    direct = stream_padded(model, factory(), [prompts[i] for i in index], continuations, **forward)
    for row, i in enumerate(index):
        torch.testing.assert_close(torch.cat(shared[row]), direct[row][len(prompts[i]) - 1:],
                                   atol=tolerance(model, read_path, family), rtol=0,
                                   msg=lambda m, row=row: f"row {row} (prompt {index[row]}) after reorder_cache: {m}")


CHECK = {"lossless": check_lossless, "bytes": check_bytes, "teacher_forced": check_teacher_forced,
         "batch": check_batch, "padding": check_padding, "rows": check_rows}


def check_exemptions(name: str) -> None:
    """A check a method does not run is a known check, with a reason, and does not apply: a method
    exempt from `lossless` has no lossless setting on the test model, one exempt from
    `teacher_forced` has no parallel view."""
    cls = method_class(name)
    for stated in (cls.not_checked, cls.known_failures):
        unknown = sorted(set(stated) - set(CHECKS))
        assert not unknown, f"{name}: names unknown checks {unknown} (checks: {CHECKS})"
        for check, reason in stated.items():
            assert isinstance(reason, str) and len(reason.split()) >= 4, f"{name}: say why for {check}"
    assert not set(cls.not_checked) & set(cls.known_failures), f"{name}: a check is either not applicable or failing"
    if "lossless" in cls.not_checked:
        assert cls.lossless_setting(CacheShape.of(teacher().config)) is None
    if "teacher_forced" in cls.not_checked:
        model, factory, _ = served(name, variants([name])[0][1], teacher())
        with pytest.raises(NotImplementedError):
            factory().reconstruct(0, 0, None)
