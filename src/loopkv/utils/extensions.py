"""Torch C++ extensions built at first use (DeepSpeed's CPU op, loopkv's CPU latent-attention
kernel): torch compiles them into TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions) and
later processes load the cached build."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

STALE_BUILD_LOCK_S = 600   # a CPU build of DeepSpeed's op takes under a minute


def clear_stale_build_locks(max_age_s: float = STALE_BUILD_LOCK_S) -> list[Path]:
    """Remove torch-extension build locks older than `max_age_s`. DeepSpeed JIT-builds a C++ op on
    first use and torch guards the build with a lock file; a job killed mid-build (kill -9, a
    scheduler's timeout) leaves the lock behind, and every later job then waits on it forever (seen:
    distill jobs asleep for 15 minutes). Returns the locks removed."""
    from torch.utils.cpp_extension import get_default_build_root

    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
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
