"""Every loopkv process runs MKL in its reproducibility mode (set by `import loopkv` before torch
loads MKL): a resumed training run can then equal an uninterrupted one bit for bit (issue 6)."""
import ctypes
import os
import subprocess
import sys

import pytest
import torch

LIB = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
PROBE = """
import ctypes, os, sys
import loopkv, torch
lib = ctypes.CDLL(sys.argv[1])
torch.mm(torch.randn(8, 8), torch.randn(8, 8))          # MKL initialised
print(os.environ.get("MKL_CBWR"), lib.mkl_serv_cbwr_get(ctypes.c_int(-1)) & 0xFFFFFFFF)
"""
STRICT, AUTO, COMPATIBLE = 0x10000, 2, 3    # MKL_CBWR_* values (mkl_cbwr.h)


def _mode(env):
    try:
        ctypes.CDLL(LIB).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        pytest.skip("this torch build does not use MKL")
    out = subprocess.run([sys.executable, "-c", PROBE, LIB], env=env, capture_output=True, text=True, check=True)
    name, mode = out.stdout.split()
    return name, int(mode)


def test_a_loopkv_process_runs_mkl_in_strict_reproducibility_mode():
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    assert _mode(env) == ("AUTO,STRICT", AUTO | STRICT)


def test_a_users_own_setting_is_kept():
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    assert _mode(env) == ("COMPATIBLE", COMPATIBLE)
