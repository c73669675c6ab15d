"""Torch C++ extensions built at first use (DeepSpeed's CPU op, loopkv's CPU latent-attention
kernel): torch compiles them into TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions) and
later processes load the cached build."""
from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

STALE_BUILD_LOCK_S = 600   # a CPU build of DeepSpeed's op takes under a minute


def extensions_root() -> Path:
    from torch.utils.cpp_extension import get_default_build_root

    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())


def clear_stale_build_locks(max_age_s: float = STALE_BUILD_LOCK_S) -> list[Path]:
    """Remove torch-extension build locks older than `max_age_s`. DeepSpeed JIT-builds a C++ op on
    first use and torch guards the build with a lock file; a job killed mid-build (kill -9, a
    scheduler's timeout) leaves the lock behind, and every later job then waits on it forever (seen:
    distill jobs asleep for 15 minutes). Returns the locks removed."""
    root = extensions_root()
    removed = []
    for lock in (*root.glob("*/lock"), *root.glob("*/*/lock")):
        try:
            if time.time() - lock.stat().st_mtime > max_age_s:
                lock.unlink()
                removed.append(lock)
        except FileNotFoundError:   # another job finished or cleared it meanwhile
            continue
    if removed:
        logging.getLogger(__name__).warning("removed stale torch-extension build locks: %s", removed)
    return removed


@contextmanager
def exclusive_build_dir(build_dir: Path, wait_s: float):
    """Hold an exclusive flock on `build_dir` while building into it or loading from it. The kernel
    drops an flock when its holder dies, so unlike torch's lock file it cannot go stale; while it is
    held, a torch lock file in `build_dir` can only have been left by a killed builder (every
    builder of the directory goes through here) and is removed, not waited on. Waits at most
    `wait_s` for another live builder, then raises TimeoutError."""
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / "loopkv-build.flock", "w") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another process has been building in {build_dir} for over {wait_s:.0f} s") from None
                time.sleep(0.2)
        (build_dir / "lock").unlink(missing_ok=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_bounded(argv: list[str], timeout_s: float) -> None:
    """Run a build command in its own process group; past `timeout_s` the whole group (ninja, the
    compiler) is killed. Raises RuntimeError with the tail of its output when it fails or times out:
    a compile that hangs must become an error the caller can fall back from, not a job that sleeps."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise RuntimeError(f"build did not finish in {timeout_s:.0f} s: {' '.join(argv)}\n{output[-2000:]}") from None
    if proc.returncode:
        raise RuntimeError(f"build failed (exit {proc.returncode}): {' '.join(argv)}\n{output[-2000:]}")
