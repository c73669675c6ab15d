"""Read config keys with errors that name the key, so a user knows which line of config.yaml to fix."""
from __future__ import annotations

from loopkv.errors import LoopKVError

_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list", bool: "true/false"}


def require(cfg: dict, key: str, section: str, kind: type | None = None, *,
            minimum: float | None = None, maximum: float | None = None):
    """cfg[key], checked for type and range; LoopKVError naming `section.key` otherwise."""
    name = f"{section}.{key}"
    if not isinstance(cfg, dict):
        raise LoopKVError(f"{section} must be a mapping, got {type(cfg).__name__}")
    if key not in cfg:
        raise LoopKVError(f"{name} is missing")
    value = cfg[key]
    if kind is not None and not _is_kind(value, kind):
        raise LoopKVError(f"{name} must be {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r}")
    if minimum is not None and value < minimum:
        raise LoopKVError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise LoopKVError(f"{name} must be <= {maximum}, got {value!r}")
    return value


def require_int_list(cfg: dict, key: str, section: str, *, minimum: int = 1) -> list[int]:
    values = require(cfg, key, section, list)
    if not values or not all(_is_kind(v, int) and v >= minimum for v in values):
        raise LoopKVError(f"{section}.{key} must be a non-empty list of integers >= {minimum}, got {values!r}")
    return values


def _is_kind(value, kind: type) -> bool:
    # bool is an int subclass in Python, but `true` is never a valid count
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)
