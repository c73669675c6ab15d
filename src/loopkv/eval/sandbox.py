"""Running untrusted generated code (HumanEval / MBPP pass@k) so that nothing it does leaves its box.

Every run gets its own box (eval/sandbox_launcher.py builds it): fresh user, PID, network, IPC,
UTS, cgroup and mount namespaces; a root holding only the interpreter, its stdlib and the shared
libraries they load, read-only, plus an empty size-limited /tmp, so nothing else of the host is
visible and nothing written survives the run; no network (a loopback that is down); no process or
thread besides the program itself, so its address-space limit is the whole run's memory; CPU,
file-size, open-file limits and a wall clock on top. The box needs no privilege on the host:
run as root, the harness hands the launcher to `nobody` first; run as a normal user, the same
path works wherever the kernel lets unprivileged users create user namespaces.

Why our own namespaces rather than bubblewrap: util-linux-free, stdlib-only code that runs
wherever Python and user namespaces do (no package to install on cluster nodes, no setuid
helper), and the whole box is ~200 lines that the tests exercise.

A run passes only when the judge beside the program writes this run's random token to the verdict
pipe after the program returned (see the launcher's DRIVER); the exit status is never read for the
verdict. The token is known only to the harness and to the judge's process, so exiting early
(sys.exit, os._exit, a signal) cannot pass; code aimed at this harness could still find it in
its own process's memory, which no in-process judge can prevent. Only the verdict leaves the box:
what is persisted (lm-eval's pass@1) is pass or fail; the outcome's stdout / stderr serve tests and
debugging, bounded by the file-size limit.
"""
from __future__ import annotations

import functools
import json
import os
import secrets
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loopkv.errors import LoopKVError

NOBODY = 65534
_LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")
_ROOT_MOUNTS = ("/mnt", "/media", "/srv", "/opt", "/tmp")   # an empty tmpfs goes over the first unused


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0          # wall clock
    cpu_s: int = 10                  # RLIMIT_CPU
    memory_mb: int = 512             # RLIMIT_AS of the run's only process: the run's memory
    output_kb: int = 256             # RLIMIT_FSIZE: its stdout and stderr files, each
    open_files: int = 64             # RLIMIT_NOFILE
    disk_kb: int = 16384             # the box's /tmp (RAM: it adds to memory_mb)
    inodes: int = 1024               # files and directories in /tmp


@dataclass
class Outcome:
    passed: bool
    status: str                      # passed | failed | timeout
    returncode: int | None
    seconds: float
    stdout: str = ""
    stderr: str = ""
    details: dict = field(default_factory=dict)


def _python() -> str:
    """A system interpreter outside the project (the project's venv is not in the box)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists():
            return candidate
    raise LoopKVError("the sandbox needs a system python3 at /usr/bin/python3 or /usr/local/bin/python3")


@functools.lru_cache(maxsize=4)
def allow_list(python: str) -> tuple[str, ...]:
    """What the box holds, read-only: the interpreter, its stdlib directory (extension modules
    included) and every shared library the interpreter and those modules load, found by `ldd`.
    Paths as the host names them: the launcher copies the symlinks on the way."""
    probe = subprocess.run([python, "-I", "-S", "-c",
                            "import sys, sysconfig; print(sys.executable); print(sysconfig.get_path('stdlib')); "
                            "print(sysconfig.get_path('platstdlib')); print(sysconfig.get_config_var('DESTSHARED') or '')"],
                           capture_output=True, text=True, check=True)
    executable, *dirs = [line for line in probe.stdout.splitlines() if line]
    paths = {python, os.path.realpath(executable), *(d for d in dirs if os.path.isdir(d))}
    binaries = [os.path.realpath(executable)]
    for d in dirs:
        if os.path.isdir(d):
            binaries += [str(p) for p in Path(d).rglob("*.so")]
    for binary in binaries:
        listing = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            words = line.split()
            for word in words:
                if word.startswith("/") and os.path.exists(word):
                    paths.add(word)
    return tuple(sorted(paths))


def _root_mount(allow: tuple[str, ...]) -> str:
    for candidate in _ROOT_MOUNTS:
        if os.path.isdir(candidate) and not any(p == candidate or p.startswith(candidate + "/") for p in allow):
            return candidate
    raise LoopKVError(f"the sandbox needs an existing directory to build its root on: none of {_ROOT_MOUNTS}")


def _plan(limits: Limits, verdict_fd: int, ready_fd: int) -> dict:
    python = _python()
    allow = allow_list(python)
    return {"python": python, "allow": list(allow), "root_mount": _root_mount(allow), "verdict_fd": verdict_fd,
            "ready_fd": ready_fd,
            "disk_kb": limits.disk_kb, "inodes": limits.inodes, "limits": asdict(limits)}


def _box_user() -> dict:
    """Popen arguments: the launcher in its own session (a timeout kills the group), and root hands
    over to `nobody` (the box is built with the user namespace's capabilities only). Set by
    Popen in C, safe in a threaded harness (preexec_fn is not)."""
    if os.geteuid() == 0:
        return {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    return {}


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """Whether sandboxed runs work on this machine, and why not (one probe run, cached)."""
    try:
        _python()
    except LoopKVError as e:
        return False, str(e)
    for tool in ("ldd",):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            return False, f"{tool} is not installed"
    probe = _run("print('ok')", Limits(timeout_s=20, cpu_s=5))
    if not probe.passed:
        return False, f"cannot build the box (user namespaces may be disabled): {probe.stderr.strip()[-400:]}"
    return True, ""


def run_program(source: str, limits: Limits = Limits(), hidden=()) -> Outcome:
    """Run `source` (a whole Python program) in a fresh box. Nothing of the host but the allow-list
    is visible inside; `hidden` is accepted for callers that name what must not be seen (the
    project, results/), and checked to be outside the allow-list."""
    ok, why = available()
    if not ok:
        raise LoopKVError(f"sandboxed execution is unavailable here: {why}")
    allow = allow_list(_python())
    for p in hidden:
        p = os.path.realpath(p)
        if any(a == p or a.startswith(p + "/") or p.startswith(a.rstrip("/") + "/") for a in allow):
            raise LoopKVError(f"cannot hide {p}: it holds or lies in the box's interpreter files")
    return _run(source, limits)


def _run(source: str, limits: Limits) -> Outcome:
    token = secrets.token_hex(16).encode()
    verdict_r, verdict_w = os.pipe()
    ready_r, ready_w = os.pipe()
    try:
        plan = _plan(limits, verdict_w, ready_w)
        command = [plan["python"], "-I", "-S", "-B", "-c", _LAUNCHER.read_text(), json.dumps(plan)]
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err, env={}, cwd="/",
                                    pass_fds=(verdict_w, ready_w), start_new_session=True, **_box_user())
            for fd in (verdict_w, ready_w):
                os.close(fd)
            verdict_w = ready_w = -1
            try:
                proc.communicate(token + b"\n" + source.encode(), timeout=limits.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(proc)   # only while it runs: once reaped, its process group id may be another's
            seconds = time.monotonic() - start
            verdict = _read_pipe(verdict_r, len(token))
            ready = _read_pipe(ready_r, 1)
            out.seek(0)
            err.seek(0)
            stdout = out.read(limits.output_kb * 1024).decode(errors="replace")
            stderr = err.read(limits.output_kb * 1024).decode(errors="replace")
            if ready != b"R" and not timed_out:
                raise LoopKVError(f"the sandbox could not build a box for this run: {stderr.strip()[-400:]}")
            status = "timeout" if timed_out else ("passed" if verdict == token else "failed")
            return Outcome(passed=status == "passed", status=status, returncode=proc.returncode, seconds=seconds,
                           stdout=stdout, stderr=stderr)
    finally:
        for fd in (verdict_r, ready_r, verdict_w, ready_w):
            if fd >= 0:
                os.close(fd)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def _kill(proc: subprocess.Popen) -> None:
    """The box's PID 1 first (the program may have left the launcher's session and reset its
    parent-death signal; it cannot have started anything else), then the launcher."""
    if proc.poll() is None:
        for pid in _children(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_pipe(fd: int, size: int) -> bytes:
    """What was written, if anything: every writer has exited, so this never blocks past EOF.
    Bytes beyond the expected size mean the channel was written by something else: nothing."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, size + 1)
    except BlockingIOError:
        return b""
    return data if len(data) == size else b""
