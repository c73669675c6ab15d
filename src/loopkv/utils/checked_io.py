"""Readers that check what they read: a truncated, malformed or foreign file raises LoopKVError naming
the file, and the line, field or tensor, never a KeyError or a traceback from deep inside a library.

One mechanism for every file loopkv reads:
- `read_json` / `iter_jsonl` / `read_jsonl`: JSON and JSON Lines (.gz too); a syntax error is reported
  with its line and column, a JSONL one with the line number of the bad row;
- `load_pt`: torch files, read with `weights_only=True` (tensors and plain containers, nothing that
  runs code); a foreign or truncated file is reported as such;
- `check_fields`: the expected fields and types of a payload (a dict spec, nested dicts allowed);
- weights: `safetensors_shapes` (a file's tensor names and shapes from its header, without reading
  the data), `check_tensors` (missing / unexpected tensors and shape mismatches against what a model
  expects), `check_finite` (no NaN or inf weights) and `check_state_dict` (all three for a state dict).
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from loopkv.errors import LoopKVError

# a field spec: a type, a tuple of types, or a mapping {field: spec} (a dict holding those fields)
NoneType = type(None)
_MAX_NAMES = 6


def _kind(value) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}"
    return f"{type(value).__name__} {value!r}"[:80] if isinstance(value, (str, int, float)) else type(value).__name__


def _foreign(what: str) -> str:
    return f"not a loopkv {what}" + ("" if what.endswith("file") else " file")


def _type_names(spec) -> str:
    types = spec if isinstance(spec, tuple) else (spec,)
    return " or ".join("null" if t is NoneType else t.__name__ for t in types)


def check_fields(obj, fields: Mapping, where: str, suffix: str = ""):
    """`obj` must be a mapping with every field of `fields`, each of the given type (a nested mapping
    spec checks a nested mapping). Returns obj; raises LoopKVError "<where>: field 'a.b' ..."."""
    _check(obj, fields, where, "", suffix)
    return obj


def _check(obj, spec, where: str, name: str, suffix: str) -> None:
    label = f"field {name!r}" if name else "the top level"
    tail = f" ({suffix})" if suffix else ""
    if isinstance(spec, Mapping):
        if not isinstance(obj, Mapping):
            raise LoopKVError(f"{where}: {label} is {_kind(obj)}, expected a mapping{tail}")
        for key, sub in spec.items():
            full = f"{name}.{key}" if name else key
            if key not in obj:
                raise LoopKVError(f"{where}: field {full!r} is missing{tail}")
            _check(obj[key], sub, where, full, suffix)
        return
    types = spec if isinstance(spec, tuple) else (spec,)
    if not isinstance(obj, types) or (isinstance(obj, bool) and bool not in types and int in types):
        raise LoopKVError(f"{where}: {label} is {_kind(obj)}, expected {_type_names(spec)}{tail}")


# -- JSON and JSON Lines ---------------------------------------------------------------------------
def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _read_error(path: Path, what: str, e: BaseException, line: int | None = None) -> LoopKVError:
    where = f"{what} {path}" + (f" line {line}" if line is not None else "")
    if isinstance(e, FileNotFoundError):
        return LoopKVError(f"{what} {path}: no such file")
    if isinstance(e, IsADirectoryError):
        return LoopKVError(f"{what} {path} is a directory, not a file")
    if isinstance(e, UnicodeDecodeError):
        return LoopKVError(f"{where}: not UTF-8 text (byte {e.start}); the file is corrupt")
    if isinstance(e, (EOFError, gzip.BadGzipFile)):
        return LoopKVError(f"{where}: corrupt or truncated gzip data ({type(e).__name__}: {e})")
    if isinstance(e, OSError):
        return LoopKVError(f"{what} {path} cannot be read ({e.strerror or e})")
    return LoopKVError(f"{where}: {type(e).__name__}: {e}")


def parse_json(text: str | bytes, where: str):
    """Parsed JSON text; a syntax error raises LoopKVError "<where>: not valid JSON at line L column C"."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LoopKVError(f"{where}: not valid JSON at line {e.lineno} column {e.colno} ({e.msg}); "
                          "the file is truncated or corrupt") from e
    except UnicodeDecodeError as e:
        raise LoopKVError(f"{where}: not UTF-8 text (byte {e.start}); the file is corrupt") from e
    except RecursionError as e:
        raise LoopKVError(f"{where}: JSON nested too deeply to read") from e


def read_json(path: str | os.PathLike, what: str = "JSON file", fields: Mapping | None = None) -> Any:
    """The parsed file. `fields` (a spec, see check_fields; {} = any mapping) checks its top level."""
    path = Path(path)
    try:
        with _open_text(path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise _read_error(path, what, e) from e
    obj = parse_json(text, f"{what} {path}")
    if fields is not None:
        check_fields(obj, fields, f"{what} {path}", _foreign(what))
    return obj


def iter_jsonl(path: str | os.PathLike, what: str = "JSONL file", fields: Mapping | None = None) -> Iterator[dict]:
    """Rows of a JSON Lines file (blank lines skipped); every row must be a JSON object holding
    `fields`. A bad row is reported with its line number."""
    path = Path(path)
    line_no = None
    try:
        # bytes, decoded line by line: a bad byte is reported on its own line
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
            for line_no, raw in enumerate(f, 1):
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                where = f"{what} {path} line {line_no}"
                row = parse_json(line, where)
                check_fields(row, fields or {}, where)
                yield row
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise _read_error(path, what, e, line_no) from e


def read_jsonl(path: str | os.PathLike, what: str = "JSONL file", fields: Mapping | None = None) -> list[dict]:
    return list(iter_jsonl(path, what, fields))


# -- torch files -----------------------------------------------------------------------------------
def _first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else "")[:limit]


def load_pt(path: str | os.PathLike, what: str, fields: Mapping | None = None, hint: str = "") -> Any:
    """A torch file read with weights_only=True (on the host). `fields` checks its payload; `hint`
    (e.g. "; delete it to restart") is appended to the message of a corrupt or truncated file."""
    import pickle

    import torch

    path = Path(path)
    if path.is_dir():
        raise LoopKVError(f"{what} {path} is a directory, not a file")
    if not path.exists():
        raise LoopKVError(f"{what} {path}: no such file")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "Weights only load failed" in str(e) and "Unsupported" in str(e):
            detail = next((ln.strip() for ln in str(e).splitlines() if "Unsupported" in ln), _first_line(e))
            raise LoopKVError(f"{what} {path} holds objects other than tensors and plain containers "
                              f"({detail[:200]}): {_foreign(what)}") from e
        raise LoopKVError(f"{what} {path} is corrupt or truncated ({type(e).__name__}: {_first_line(e)}){hint}") from e
    except Exception as e:   # torch raises many types for truncated or corrupt files
        raise LoopKVError(f"{what} {path} is corrupt or truncated ({type(e).__name__}: {_first_line(e)}){hint}") from e
    if fields is not None:
        check_fields(obj, fields, f"{what} {path}", _foreign(what))
    return obj


# -- weights ---------------------------------------------------------------------------------------
def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES])
    return shown + (f" and {len(names) - _MAX_NAMES} more" if len(names) > _MAX_NAMES else "")


def safetensors_shapes(path: str | os.PathLike) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} from a safetensors file's header (the data is not read). A truncated file
    or a corrupt header raises LoopKVError naming the file."""
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as e:   # SafetensorError, OSError, ...: the header or the file size is wrong
        raise LoopKVError(f"weights {path} are not a readable safetensors file ({type(e).__name__}: "
                          f"{_first_line(e)}); the file is truncated or corrupt") from e


def check_tensors(found: Mapping[str, tuple], expected: Mapping[str, tuple], source: str,
                  optional: Iterable[str] = ()) -> None:
    """The tensors a file holds (`found`, name -> shape) must be exactly those a model expects
    (`optional`: expected names a file may leave out, e.g. a tied copy): a missing or unexpected
    tensor or a shape mismatch raises LoopKVError naming `source` and the tensors."""
    optional = set(optional)
    missing = sorted(set(expected) - set(found) - optional)
    unexpected = sorted(set(found) - set(expected))
    mismatched = sorted(k for k in set(found) & set(expected) if tuple(found[k]) != tuple(expected[k]))
    problems = []
    if missing:
        problems.append(f"missing tensor(s) {_names(missing)}")
    if unexpected:
        problems.append(f"unexpected tensor(s) {_names(unexpected)}")
    if mismatched:
        problems.append("shape mismatch: " + _names([f"{k} is {tuple(found[k])} where the model expects "
                                                     f"{tuple(expected[k])}" for k in mismatched]))
    if problems:
        raise LoopKVError(f"{source}: " + "; ".join(problems))


def check_finite(named_tensors: Iterable[tuple[str, Any]], source: str) -> None:
    """Every floating-point tensor finite (one pass per tensor, no copy kept): a NaN or inf weight
    raises LoopKVError naming `source` and the tensors."""
    import torch

    bad, seen = [], set()
    for name, t in named_tensors:
        if not torch.is_tensor(t) or not t.is_floating_point() or id(t) in seen:
            continue
        seen.add(id(t))
        # the sum is NaN or inf when any element is (a fast reduction); only then the exact check,
        # which also clears a finite tensor whose sum overflowed
        if not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):
            bad.append(name)
    if bad:
        raise LoopKVError(f"{source}: non-finite values (NaN or inf) in tensor(s) {_names(bad)}")


def check_state_dict(state, module, source: str) -> None:
    """A state dict about to be loaded into `module`: a mapping of tensors holding exactly the
    module's tensors, with its shapes, all finite."""
    import torch

    if not isinstance(state, Mapping):
        raise LoopKVError(f"{source}: the weights are {_kind(state)}, expected a mapping of tensors")
    not_tensors = sorted(str(k) for k, v in state.items() if not torch.is_tensor(v))
    if not_tensors:
        raise LoopKVError(f"{source}: entries that are not tensors: {_names(not_tensors)}")
    check_tensors({k: tuple(v.shape) for k, v in state.items()},
                  {k: tuple(v.shape) for k, v in module.state_dict().items()}, source)
    check_finite(state.items(), source)
