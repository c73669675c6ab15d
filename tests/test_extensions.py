"""Building torch C++ extensions at first use: no lock or compiler hang may put a job to sleep."""
import os
import subprocess
import sys
import time

import pytest

from loopkv.utils.extensions import clear_stale_build_locks, exclusive_build_dir, run_bounded


def test_stale_extension_build_locks_are_cleared_fresh_ones_kept(tmp_path, monkeypatch):
    """A job killed while DeepSpeed JIT-builds its op leaves torch's build lock behind; later jobs
    would wait on it forever."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    stale, fresh = tmp_path / "py311_cpu" / "deepspeed_shm_comm" / "lock", tmp_path / "other_op" / "lock"
    for lock in (stale, fresh):
        lock.parent.mkdir(parents=True)
        lock.write_text("")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    assert clear_stale_build_locks() == [stale]
    assert not stale.exists() and fresh.exists()


def test_a_killed_builders_lock_is_removed_however_fresh(tmp_path):
    """torch's lock file left by a killed build (its mtime may be seconds old, e.g. on a machine
    restored from a snapshot) is removed once the directory's flock is held, not waited on."""
    (tmp_path / "lock").write_text("")
    with exclusive_build_dir(tmp_path, wait_s=1):
        assert not (tmp_path / "lock").exists()


def _holder(tmp_path, seconds: float, leave_lock: bool = False) -> subprocess.Popen:
    """Another process holding the directory (building, or killed mid-build with torch's lock file
    written); returns once it holds it."""
    lock = f"(Path({str(tmp_path)!r}) / 'lock').write_text(''); " if leave_lock else ""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from loopkv.utils.extensions import exclusive_build_dir\n"
        f"with exclusive_build_dir(Path({str(tmp_path)!r}), 1):\n"
        f"    {lock}print('held', flush=True); time.sleep(float(sys.argv[1]))"), str(seconds)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_live_builder_is_waited_for_within_the_limit(tmp_path):
    holder = _holder(tmp_path, 3)
    try:
        with pytest.raises(TimeoutError, match="another process"):
            with exclusive_build_dir(tmp_path, wait_s=0.5):
                pass
        waited = time.monotonic()
        with exclusive_build_dir(tmp_path, wait_s=30):   # acquired once the holder's 3 s are over
            assert time.monotonic() - waited > 1.5
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_killed_mid_build_releases_the_directory(tmp_path):
    holder = _holder(tmp_path, 60, leave_lock=True)
    holder.kill()
    holder.wait()
    with exclusive_build_dir(tmp_path, wait_s=5):
        assert not (tmp_path / "lock").exists()


def test_a_hung_build_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "grandchild-ran"
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="did not finish in 1 s"):
        # the shell's child (a stand-in for ninja's compiler) must die with it
        run_bounded(["bash", "-c", f"echo compiling; (sleep 3; touch {marker}) & wait"], timeout_s=1)
    assert time.monotonic() - start < 2.5
    time.sleep(3)
    assert not marker.exists()


def test_a_failed_build_reports_its_output():
    with pytest.raises(RuntimeError, match=r"exit 3(.|\n)*no such header"):
        run_bounded(["bash", "-c", "echo 'error: no such header' >&2; exit 3"], timeout_s=10)
    run_bounded(["true"], timeout_s=10)
