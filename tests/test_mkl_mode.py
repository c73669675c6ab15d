"""loopkv commands run MKL in its reproducible mode (set before MKL's first computation), so a
resumed training run can equal an uninterrupted one bit for bit (issue 6); the speed and memory
benchmarks keep MKL's default mode; a mode the user chose is kept."""
import os
import subprocess
import sys

import pytest

from loopkv.utils.numerics import mkl_mode

PROBE = """
import sys
from loopkv.cli import build_parser, prepare_numerics
from loopkv.utils.numerics import mkl_mode
build_parser()                                  # every command module imported, as `loopkv` does
prepare_numerics(sys.argv[1])
print(mkl_mode())
"""
OFF, AUTO, COMPATIBLE, STRICT = 1, 2, 3, 0x10000   # mkl_cbwr.h


def _mode(command, **env):
    base = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    out = subprocess.run([sys.executable, "-c", PROBE, command], env={**base, **env}, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.fixture(autouse=True)
def _needs_mkl():
    if mkl_mode() is None:
        pytest.skip("this torch build does not use MKL")


@pytest.mark.parametrize("command", ["distill", "melt-train", "teacher-pretrain", "method-eval", "lm-eval-shard"])
def test_result_producing_commands_run_mkl_reproducibly(command):
    assert _mode(command) == AUTO | STRICT


@pytest.mark.parametrize("command", ["serve-bench", "kernel-bench"])
def test_benchmarks_measure_mkls_default_mode(command):
    assert _mode(command) == OFF


def test_a_users_own_setting_is_kept():
    assert _mode("distill", MKL_CBWR="COMPATIBLE") == COMPATIBLE
