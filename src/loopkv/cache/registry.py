"""Name -> KV method class: the one list of methods. Adding a method = one file in loopkv/cache (a
LoopCache subclass stating its name, label, budget rule, config keys, codec layout, read paths and
bytes per token) and one entry in BUILTIN here; `register_method` adds one from outside (a plugin, a
test's toy method). Everything method-specific elsewhere (settings, config validation, reports, the
workflow's config slices, the tests' parametrisations) is derived from the registered classes, read
at the time of use, so a method registered later shows up everywhere."""
from __future__ import annotations

import inspect
import re

from loopkv.cache.base import SHARED_CONFIG_KEYS, LoopCache
from loopkv.cache.cla import CLACache
from loopkv.cache.final_loop import FinalLoopCache
from loopkv.cache.full import FullLoopCache
from loopkv.cache.kv_quant import QuantCache
from loopkv.cache.lla import LLACache
from loopkv.cache.lla2d import LLA2DCache
from loopkv.cache.lla_decoupled import LLADecoupledCache
from loopkv.cache.melt import MeltCache
from loopkv.cache.mla_head import MLAHeadCache
from loopkv.errors import LoopKVError

# in report order (tables and figures list methods this way)
BUILTIN: tuple[type[LoopCache], ...] = (
    FullLoopCache,
    FinalLoopCache,
    LLACache,
    LLA2DCache,
    MLAHeadCache,
    CLACache,
    QuantCache,
    MeltCache,
    LLADecoupledCache,
)
NAME = re.compile(r"[a-z][a-z0-9_]*")   # a config value, a CLI argument, a path component, a wildcard value
METHODS: dict[str, type[LoopCache]] = {}


def register_method(cls: type[LoopCache]) -> type[LoopCache]:
    """Add a method class (usable as a class decorator); returns it. A duplicate or invalid name, a
    class that is not a complete LoopCache, or one without a label or budget rule is refused."""
    if not (isinstance(cls, type) and issubclass(cls, LoopCache)):
        raise TypeError(f"a KV method is a LoopCache subclass, got {cls!r}")
    name = cls.__dict__.get("name")   # its own, not inherited (lla2d is an lla with another name)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"{cls.__name__}: a KV method's name must match {NAME.pattern}, got {name!r}")
    if name in METHODS:
        raise ValueError(f"KV method {name!r} is already registered ({METHODS[name].__name__})")
    problems = []
    if inspect.isabstract(cls):
        problems.append(f"abstract methods {sorted(cls.__abstractmethods__)} not implemented")
    if not isinstance(cls.label, str) or not cls.label:
        problems.append("no label (its name in reports)")
    if cls.setting_at_ratio.__func__ is LoopCache.setting_at_ratio.__func__:
        problems.append("no budget rule (classmethod setting_at_ratio)")
    keys = (*cls.config_keys, *cls.served_config_keys)
    bad = [k for k in keys if not (isinstance(k, str) and re.fullmatch(r"methods\.[a-z][a-z0-9_]*", k))]
    if bad:
        problems.append(f"config keys must be dotted paths under 'methods.', got {bad}")
    if cls.read_paths and not all(isinstance(p, str) and p for p in cls.read_paths):
        problems.append(f"read paths must be names, got {cls.read_paths}")
    if problems:
        raise ValueError(f"KV method {name!r} ({cls.__name__}): " + "; ".join(problems))
    METHODS[name] = cls
    return cls


def unregister_method(name: str) -> type[LoopCache]:
    """Remove a method registered from outside (the builtin ones stay); returns its class."""
    if name not in METHODS:
        raise LoopKVError(f"unknown KV method {name!r} (known: {', '.join(sorted(METHODS))})")
    if METHODS[name] in BUILTIN:
        raise ValueError(f"{name!r} is a builtin KV method and stays registered")
    return METHODS.pop(name)


for _cls in BUILTIN:
    register_method(_cls)
del _cls


def method_class(name: str) -> type[LoopCache]:
    try:
        return METHODS[name]
    except KeyError:
        raise LoopKVError(f"unknown KV method {name!r} (known: {', '.join(sorted(METHODS))})") from None


def make_cache(name: str, config, **kwargs) -> LoopCache:
    return method_class(name)(config, **kwargs)


def budgeted_methods() -> tuple[str, ...]:
    """Methods configured by a compression ratio (a Table 1 row at a budget): not the teacher's full
    cache, not MELT (whose budget is fixed by its architecture)."""
    return tuple(name for name, cls in METHODS.items() if cls.budgeted)


def codec_methods() -> tuple[str, ...]:
    """Methods with a learned codec (SVD-initialised, distilled): those with a codec layout."""
    return tuple(name for name, cls in METHODS.items() if cls.layout is not None)


def codec_layouts() -> dict[str, str]:
    """Codec method -> the codec layout whose calibration moments it needs."""
    return {name: cls.layout for name, cls in METHODS.items() if cls.layout is not None}


def read_path_methods() -> tuple[str, ...]:
    """Methods with read paths (methods.read_path applies to them)."""
    return tuple(name for name, cls in METHODS.items() if cls.read_paths)


def method_labels() -> dict[str, str]:
    """Method -> its name in reports, in report order."""
    return {name: cls.label for name, cls in METHODS.items()}


def config_keys(name: str, served: bool = False) -> tuple[str, ...]:
    """The config keys (dotted paths) a job of method `name` reads besides methods.budgets.<its budget>:
    the shared `methods` keys, the method's own, and when the job serves (evaluates) it, those its
    serving reads too."""
    cls = method_class(name)
    return (*SHARED_CONFIG_KEYS, *cls.config_keys, *(cls.served_config_keys if served else ()))
