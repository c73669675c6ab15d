"""The provenance block every result file carries: what produced it, from what, and how."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

_PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "deepspeed", "snakemake", "loopkv")
_NONE = type(None)
# every field `Provenance.block` writes, with its type: a block lacking one is incomplete (`loopkv verify`
# reports its result unverifiable); config is any JSON value
BLOCK_FIELDS = {"config": object, "config_hash": str, "seed": (int, _NONE), "inputs": dict,
                "git_commit": (str, _NONE), "packages": dict, "python": str, "mkl_cbwr": (str, _NONE),
                "device": (str, _NONE), "device_peak_bytes": (int, _NONE), "host": str,
                "wall_time_s": (int, float)}
INPUT_FIELDS = {"path": str, "sha256": str}   # each entry of a block's inputs


def config_hash(config_slice) -> str:
    canonical = json.dumps(config_slice, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def path_sha256(path: str | os.PathLike) -> str:
    """Hash of a file, or of a directory's files (names and contents, sorted)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    if not path.is_dir():
        raise FileNotFoundError(f"cannot hash {path}: no such file or directory")
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(path)).encode())
        h.update(file_sha256(p).encode())
    return h.hexdigest()


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _device(what: str = "resolved_device"):
    """The device this process resolved (or its peak memory), if any: a command that never did
    computed on no model (looked up without importing torch into commands that never load it)."""
    device = sys.modules.get("loopkv.utils.device")
    return getattr(device, what)() if device is not None else None


class Provenance:
    """Start it when a job starts; `block()` when writing the result."""

    def __init__(self, config_slice, seed: int | None, inputs: dict[str, str | os.PathLike] | None = None):
        self.config_slice = config_slice
        self.seed = seed
        missing = {k: str(v) for k, v in (inputs or {}).items() if not Path(v).exists()}
        if missing:
            from loopkv.errors import LoopKVError

            raise LoopKVError(f"input(s) not found: {missing}")
        # hashed when the job starts: the inputs as they were consumed
        self.inputs = {k: {"path": str(v), "sha256": path_sha256(v)} for k, v in (inputs or {}).items()}
        self.started = time.time()

    def add_inputs(self, inputs: dict[str, str | os.PathLike]) -> None:
        """Inputs a job finds in its config (e.g. the corpus's source files), hashed now."""
        extra = Provenance(None, None, inputs)
        self.inputs.update(extra.inputs)

    def key(self) -> str:
        """Identity of this job's work (config, seed, input contents): e.g. to key resumable state."""
        return config_hash({"config": self.config_slice, "seed": self.seed,
                            "inputs": {k: v["sha256"] for k, v in self.inputs.items()}})

    def block(self) -> dict:
        return {
            "config": self.config_slice,
            "config_hash": config_hash(self.config_slice),
            "seed": self.seed,
            "inputs": self.inputs,
            "git_commit": git_commit(),
            "packages": package_versions(),
            "python": platform.python_version(),
            "mkl_cbwr": os.environ.get("MKL_CBWR"),   # MKL's reproducibility mode (utils/numerics.py)
            "device": _device(),                     # where it computed (launch.device, utils/device.py)
            "device_peak_bytes": _device("device_peak_bytes"),   # the CUDA allocator's peak so far (GPU only)
            "host": platform.node(),
            "wall_time_s": round(time.time() - self.started, 3),
        }
