"""The fused CPU pass of latent attention (cpu_latent_attention.cpp): the math of
`latent_attention.torch_latent_attention` in one C++ call per (loop, layer), K rebuilt 16 keys at a
time, V absorbed, a decode step's own token in the same softmax.

Why it exists: at the embedded default a decode step's attention call is a few kilobytes of work,
so its time is per-operation overhead; the tiled torch path spends ~50 aten operations per call
where the teacher spends three (two cats and SDPA). One call brings the latent-store path to the
teacher's operation count.

Built at first use with torch's extension loader (g++ and ninja, both needed by DeepSpeed's CPU op
as well), in a child process with a time limit, and cached in its own directory under
TORCH_EXTENSIONS_DIR; a later process loads the cached build in well under a second.
`LOOPKV_CPU_KERNEL` picks the implementation: `auto` (default: this kernel, or the tiled torch path
with a warning when it cannot be built), `cpp` (this kernel or an error), `torch` (never build).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import torch

from loopkv.errors import LoopKVError
from loopkv.models.rope import Rotary
from loopkv.serve.latent_attention import (exact_attention_with_lse, folds_own, merge_partial_attention,
                                             rotated_own)

SOURCE = Path(__file__).with_name("cpu_latent_attention.cpp")
NAME, CFLAGS, LDFLAGS = "loopkv_cpu_latent_attention", ("-O3", "-fopenmp"), ("-fopenmp",)
BUILT = "loopkv-built"         # written by the build process after the module loaded
BUILD_TIMEOUT_S = 600          # ~50 s on 2 cores
CHOICES = ("auto", "cpp", "torch")
_state: dict = {}   # "module" once built, "error" once a build failed (auto does not retry per call)
_NONE, _NO_MASK = torch.empty(0), torch.empty(0, dtype=torch.bool)   # "not given" to the kernel
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
                raise LoopKVError(f"the CPU latent-attention kernel could not be built: {e}") from e
            log.warning("CPU latent-attention kernel not built (%s: %s); using the tiled torch path",
                        type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    return _state.get("module")


def implementation() -> str:
    """Which implementation CPU latent reads use in this process: 'cpp' or 'torch' (for reports)."""
    return "cpp" if extension() is not None else "torch"


def build_dir() -> Path:
    """This source's build directory: keyed by the source, the flags and torch's version, so a
    changed kernel (or another torch or Python) never meets an old build, and nothing but loopkv
    builds there."""
    import hashlib

    from loopkv.utils.extensions import extensions_root

    key = "\0".join((SOURCE.read_text(), *CFLAGS, *LDFLAGS, torch.__version__, sys.version))
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

    return load_inline(name=NAME, cpp_sources=[SOURCE.read_text()], functions=["latent_attention", "simd_level"],
                       extra_cflags=list(CFLAGS), extra_ldflags=list(LDFLAGS), build_directory=str(where),
                       verbose=False)


def cpu_latent_attention(module, q, ck, cv, up_k, mu_k, up_v, mu_v, positions, key_valid=None,
                         rope_theta: float = 10000.0, rope_tables=None, own=None, own_tables=None):
    """latent_attention on CPU through the kernel `module` (arguments and result as there). The
    kernel checks shapes and converts dtypes itself and folds a decode step's own token (one query,
    mask None) into its softmax, rotating it when `own_tables` are given; other new tokens are
    merged here."""
    if rope_tables is None:
        if positions.shape != ck.shape[:2]:
            raise ValueError(f"positions {tuple(positions.shape)} must be (B, S) of the latents {tuple(ck.shape[:2])}")
        rope_tables = Rotary(q.shape[-1], rope_theta).cos_sin(positions, torch.float32)
    fold = folds_own(q, own)
    own_k, own_v = (own[0], own[1]) if fold else (_NONE, _NONE)
    own_cos, own_sin = own_tables if fold and own_tables is not None else (_NONE, _NONE)
    out, lse = module.latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, *rope_tables,
                                       _NO_MASK if key_valid is None else key_valid, own_k, own_v, own_cos, own_sin)
    if fold or own is None:
        return out, lse
    return merge_partial_attention(out, lse, *exact_attention_with_lse(q, *rotated_own(own, own_tables)))


if __name__ == "__main__":   # the build process `_build` starts: compile, check the module loads, mark it built
    _load(Path(sys.argv[1]))
    (Path(sys.argv[1]) / BUILT).write_text("")
