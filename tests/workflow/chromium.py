"""Headless Chromium from Debian's package, for the test of the HTML report.

`ensure_installed()` installs it with apt when it is missing and the process may (root); it returns
why not otherwise, and the caller skips with that reason (as slurm_cluster.py does for SLURM).
`dump_dom(path)` loads a local file, lets its scripts run and returns the DOM they leave.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

PACKAGES = ["chromium"]
NAMES = ("chromium", "chromium-browser")


def binary() -> str | None:
    return next((path for path in map(shutil.which, NAMES) if path), None)


def ensure_installed() -> str | None:
    """None when Chromium is there (installing it if needed and possible), else why not."""
    if binary():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "chromium missing and cannot be installed (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", *PACKAGES]
    proc = subprocess.run(install, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        update = subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        proc = subprocess.run(install, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return f"apt-get install {' '.join(PACKAGES)} failed: {(update.stderr + proc.stderr)[-500:]}"
    return None if binary() else "chromium still missing after apt-get install"


def dump_dom(path: Path, budget_ms: int = 20000, timeout: float = 180) -> str:
    """The DOM of file `path` after its scripts ran for `budget_ms` of virtual time (timers run
    without waiting for the wall clock)."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        proc = subprocess.run(
            [binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-extensions", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
             "--dump-dom", Path(path).resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise AssertionError(f"chromium failed on {path} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout
