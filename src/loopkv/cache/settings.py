"""From a (method, compression ratio) cell of a comparison to a ready cache factory.

A setting is the method's constructor arguments at a cache budget (the budget rule on its class,
cache/budget.py). Methods with a codec layout (registry.codec_methods(): lla, lla2d, mla_head) also
need the codec: SVD-initialised from the calibration moments of the method's layout, then distilled
(train/distill.py); the others need nothing.

The method lists are read from the registry when used (registry.codec_methods(), read_path_methods(),
codec_layouts()), so a method registered later is included; the module-level names CODEC_METHODS,
READ_PATH_METHODS and LAYOUT_OF_CODEC are computed at each access for the callers that import them.
"""
from __future__ import annotations

from typing import Callable

from loopkv.cache.base import LoopCache
from loopkv.cache.budget import CacheShape
from loopkv.cache.latent_codec import LatentCodec
from loopkv.cache.registry import codec_layouts, codec_methods, make_cache, method_class, read_path_methods
from loopkv.errors import LoopKVError

CACHE_BITS = {"bfloat16": 16, "float16": 16, "float32": 32}
_DERIVED = {"CODEC_METHODS": codec_methods, "READ_PATH_METHODS": read_path_methods, "LAYOUT_OF_CODEC": codec_layouts}


def __getattr__(name: str):
    """CODEC_METHODS, READ_PATH_METHODS, LAYOUT_OF_CODEC: the registry's lists as of this access."""
    if name in _DERIVED:
        return _DERIVED[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def method_setting(method: str, ratio: float, config, cache_dtype: str, k_share: float) -> dict:
    """{"method", "kwargs", "ratio" (achieved)} at `ratio` x fewer bytes than a `cache_dtype` teacher."""
    cls = method_class(method)
    found = cls.setting_at_ratio(CacheShape.of(config), ratio, CACHE_BITS[cache_dtype], k_share)
    if found is None:
        raise LoopKVError(f"{method} cannot reach {ratio:g}x on this model "
                          f"(T={config.total_ut_steps}, D={config.num_hidden_layers}, cache {cache_dtype})")
    return {"method": method, "kwargs": found["kwargs"], "ratio": found["ratio"]}


def configured_setting(methods_cfg: dict, method: str, budget: str, config) -> dict:
    """The setting of `method` at the budget labelled `budget` in config section `methods`
    ("1x" is the teacher's own cache)."""
    ratios = {"1x": 1.0, **methods_cfg["budgets"]}
    if budget not in ratios:
        raise LoopKVError(f"config key 'methods.budgets' has no budget {budget!r} (known: {', '.join(ratios)})")
    setting = method_setting(method, ratios[budget], config, methods_cfg["cache_dtype"], methods_cfg["k_share"])
    cls = method_class(method)
    for key in cls.config_keys:   # the method's own knobs (kv_quant: tokens per key-quantisation group)
        if key.removeprefix("methods.") not in methods_cfg:
            raise LoopKVError(f"config key {key!r} is missing from this job's methods slice")
    setting["kwargs"] = cls.configured_kwargs(dict(setting["kwargs"]), methods_cfg, CacheShape.of(config))
    return {**setting, "budget": budget}


CODEC_FIELDS = {"setting": {"method": str, "kwargs": dict}, "codec_state": dict}


def read_codec_file(path, setting: dict | None = None) -> dict:
    """A saved codec ({"setting", "codec_state", ...}); a truncated or foreign file, or one distilled
    for another setting than `setting`, raises LoopKVError naming it."""
    from loopkv.utils.checked_io import load_pt

    saved = load_pt(path, "codec", CODEC_FIELDS, hint="; re-run its distillation")
    if setting is not None and saved["setting"]["kwargs"] != setting["kwargs"]:
        raise LoopKVError(f"codec {path} was distilled for {saved['setting']}, not {setting}")
    return saved


def load_codec(setting: dict, config, state: dict, source: str = "codec state") -> LatentCodec:
    """The codec of `setting` holding `state` (from the file `source`): its tensors must be exactly
    the codec's, with its shapes, all finite."""
    from loopkv.utils.checked_io import check_state_dict

    codec = new_codec(setting, config)
    check_state_dict(state, codec, source)
    codec.load_state_dict(state)
    return codec


def new_codec(setting: dict, config) -> LatentCodec:
    """The (untrained) codec of a codec method's setting, as its class builds it (`new_codec`)."""
    cls = method_class(setting["method"])
    if cls.layout is None:
        raise LoopKVError(f"{setting['method']} has no codec (codec methods: {', '.join(codec_methods())})")
    return cls.new_codec(setting["kwargs"], config)


def svd_codec(setting: dict, config, calibration, init: str = "svd", seed: int = 0) -> LatentCodec:
    """The codec initialised from calibration moments: the paper's SVD initialisation, or one of LLA
    Table 10's ablations of it (LatentCodec.initialise: svd_loop1, random with `seed`)."""
    codec = new_codec(setting, config)
    layout = method_class(setting["method"]).layout
    if layout not in calibration.layouts:
        raise LoopKVError(f"calibration has no moments for layout {layout!r} (needed by {setting['method']}); "
                          f"add it to calibration.layouts")
    moments = {kind: calibration.moments[layout, kind] for kind in ("k", "v")}
    codec.initialise(init, {k: m.mean() for k, m in moments.items()}, {k: m.covariance() for k, m in moments.items()},
                     seed)
    return codec


def served_read_path(method: str, configured: str) -> str | None:
    """The read path `method` is served through when the config asks for `configured`: that one where
    the method has it, else its default (mla_head has no fused read): every path hands attention the
    same values (tests/cache), only time and memory differ. None for a method without read paths."""
    paths = method_class(method).read_paths
    if not paths:
        return None
    return configured if configured in paths else paths[0]


def cache_factory(setting: dict, config, codec: LatentCodec | None = None,
                  read_path: str | None = None) -> Callable[[], LoopCache]:
    """A fresh cache of the setting's method per call (generation needs one per batch). A codec
    method is built from its codec (the setting's ranks are the codec's). `read_path`: for the
    methods that have read paths (the codec methods; default their first, latent); others ignore it."""
    method, kwargs = setting["method"], dict(setting["kwargs"])
    cls = method_class(method)
    if cls.layout is not None:
        if codec is None:
            raise LoopKVError(f"{method} needs a codec")
        kwargs = {"codec": codec}
    if cls.read_paths:
        kwargs["read_path"] = read_path or cls.read_paths[0]
    return lambda: make_cache(method, config, **kwargs)

