"""loopkv's CPU kernels (C++: cpu_latent_attention.cpp, the fused read of latent attention;
cpu_latent_encode.cpp, LLA's encode at serving time), built as one torch extension at first use.

Built with torch's extension loader (g++ and ninja, both needed by DeepSpeed's CPU op as well), in
a child process with a time limit, and cached in its own directory under TORCH_EXTENSIONS_DIR; a
later process loads the cached build in well under a second. `LOOPKV_CPU_KERNEL` picks the
implementation: `auto` (default: these kernels, or the torch paths with a warning when they cannot
be built), `cpp` (these kernels or an error), `torch` (never build).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import torch

from loopkv.errors import LoopKVError

# one extension, one source per kernel
SOURCES = tuple(Path(__file__).with_name(f) for f in ("cpu_latent_attention.cpp", "cpu_latent_encode.cpp"))
FUNCTIONS = ["latent_attention", "simd_level", "encode_latents"]
NAME, CFLAGS, LDFLAGS = "loopkv_cpu_kernels", ("-O3", "-fopenmp"), ("-fopenmp",)
BUILT = "loopkv-built"         # written by the build process after the module loaded
BUILD_TIMEOUT_S = 600          # ~50 s on 2 cores
CHOICES = ("auto", "cpp", "torch")
_state: dict = {}   # "module" once built, "error" once a build failed (auto does not retry per call)
log = logging.getLogger(__name__)


def choice() -> str:
    value = os.environ.get("LOOPKV_CPU_KERNEL", "auto")
    if value not in CHOICES:
        raise LoopKVError(f"LOOPKV_CPU_KERNEL must be one of {CHOICES}, got {value!r}")
    return value


def extension():
    """The built module, or None when LOOPKV_CPU_KERNEL=torch or (auto) the build failed."""
    mode = choice()
    if mode == "torch":
        return None
    if "module" not in _state and ("error" not in _state or mode == "cpp"):
        try:
            _state["module"] = _build()
        except Exception as e:   # compiler missing, headers missing, ...: say so once, keep serving
            _state["error"] = e
            if mode == "cpp":
                raise LoopKVError(f"the CPU kernels (latent attention, LLA encode) could not be built: {e}") from e
            log.warning("CPU kernels not built (%s: %s); latent attention and LLA's encode use the torch paths",
                        type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    return _state.get("module")


def implementation() -> str:
    """Which implementation CPU latent reads and encodes use in this process: 'cpp' or 'torch' (for reports)."""
    return "cpp" if extension() is not None else "torch"


def build_dir() -> Path:
    """The build directory: keyed by the sources, the flags and torch's version, so a changed kernel
    (or another torch or Python) never meets an old build, and nothing but loopkv builds there."""
    import hashlib

    from loopkv.utils.extensions import extensions_root

    key = "\0".join((*(f.read_text() for f in SOURCES), *CFLAGS, *LDFLAGS, torch.__version__, sys.version))
    return extensions_root() / f"{NAME}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _build():
    """Compile in a child process under a time limit (a hung compiler or lock becomes an error, which
    `auto` falls back from), holding the directory's flock; then load the cached build here."""
    from loopkv.utils.extensions import exclusive_build_dir, run_bounded

    where = build_dir()
    with exclusive_build_dir(where, wait_s=BUILD_TIMEOUT_S):
        if not (where / BUILT).exists():
            run_bounded([sys.executable, "-m", __name__, str(where)], BUILD_TIMEOUT_S)
        return _load(where)


def _load(where: Path):
    from torch.utils.cpp_extension import load_inline

    return load_inline(name=NAME, cpp_sources=[f.read_text() for f in SOURCES], functions=FUNCTIONS,
                       extra_cflags=list(CFLAGS), extra_ldflags=list(LDFLAGS), build_directory=str(where),
                       verbose=False)


if __name__ == "__main__":   # the build process `_build` starts: compile, check the module loads, mark it built
    _load(Path(sys.argv[1]))
    (Path(sys.argv[1]) / BUILT).write_text("")
