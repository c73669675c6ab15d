"""Run-to-run reproducible CPU numerics for the commands whose results must repeat bit for bit.

Intel MKL (torch's CPU BLAS) is not run-to-run reproducible in its default mode: fresh processes
computing the same training step from the same state disagreed at float round-off in 2-5% of runs
(measured, issue 6; with ASLR off too, so not an address effect), so a resumed run could not equal an
uninterrupted one bit for bit. Its conditional numerical reproducibility mode (MKL_CBWR) removed it
(0 in 87 runs). MKL reads the variable at its first computation, so `loopkv` sets it before running a
command. The speed and memory benchmarks keep MKL's default mode: they measure what a user would
run, and the strict mode's buffers added 50-70 MiB to every method's peak memory (measured).
"""
from __future__ import annotations

import ctypes
import os

MODE = "AUTO,STRICT"


def reproducible_mkl() -> None:
    """Ask MKL for its reproducible mode unless the user chose one (MKL_CBWR already set)."""
    os.environ.setdefault("MKL_CBWR", MODE)


def mkl_mode() -> int | None:
    """MKL's active mode bits (mkl_cbwr.h: 1 off, 2 auto, 3 compatible, | 0x10000 strict), or None
    when torch does not use MKL. Reading it initialises MKL: call after the mode is chosen."""
    import torch

    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        getter = lib.mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    return getter(ctypes.c_int(-1)) & 0xFFFFFFFF
