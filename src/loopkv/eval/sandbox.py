"""Running untrusted generated code (HumanEval / MBPP pass@k) so that nothing it does reaches the host.

Each program runs as user `nobody` in fresh network, PID and mount namespaces (util-linux
`unshare` + `setpriv`; needs root, or a kernel that lets this process create the namespaces):
- no network: the namespace has only a loopback interface, and it is down;
- its own PID 1: when the run ends or times out, every process it started dies with it;
- an empty working directory on a private tmpfs; /tmp, the home directories and every path in
  `hidden` (the project, results/) are covered by empty tmpfs mounts, so their files can be
  neither read nor deleted; as `nobody` it cannot write anything else root owns;
- resource limits: CPU seconds, address space (memory), processes for `nobody`, file size (its
  output goes to a size-limited file, not an unbounded pipe), open files, no core dumps;
- a wall-clock timeout on top.
The program text arrives on stdin, so nothing of it is written where the host could run it.
A run passes only if the interpreter exits 0 within the limits.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from loopkv.errors import LoopKVError

NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0          # wall clock
    cpu_s: int = 10                  # RLIMIT_CPU
    memory_mb: int = 512             # RLIMIT_AS
    processes: int = 16              # RLIMIT_NPROC for the sandbox user
    output_kb: int = 256             # RLIMIT_FSIZE: stdout + stderr file
    open_files: int = 64             # RLIMIT_NOFILE


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
    """A system interpreter outside the project (the project's venv is hidden from the sandbox)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists():
            return candidate
    raise LoopKVError("the sandbox needs a system python3 at /usr/bin/python3 or /usr/local/bin/python3")


def available() -> tuple[bool, str]:
    """Whether sandboxed runs work on this machine, and why not."""
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return False, f"{tool} (util-linux) is not installed"
    try:
        _python()
    except LoopKVError as e:
        return False, str(e)
    probe = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        return False, f"cannot create namespaces: {probe.stderr.decode(errors='replace').strip()}"
    return True, ""


def _limits_setter(limits: Limits):
    def apply():
        os.setsid()   # its own process group: a timeout kills everything it started
        for name, value in ((resource.RLIMIT_CPU, limits.cpu_s), (resource.RLIMIT_AS, limits.memory_mb * 2**20),
                            (resource.RLIMIT_NPROC, limits.processes),
                            (resource.RLIMIT_FSIZE, limits.output_kb * 1024),
                            (resource.RLIMIT_NOFILE, limits.open_files), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(name, (value, value))
    return apply


def _inner_script(hidden: list[str], python: str) -> str:
    """Runs as root inside the new namespaces: hide paths, make the box, drop to nobody, exec."""
    covers = ["/tmp", "/root", "/home", *hidden]
    mounts = " && ".join(f"if [ -d '{p}' ]; then mount -t tmpfs -o size=1m,mode=0755 none '{p}'; fi" for p in covers)
    return (
        "set -e; mount --make-rprivate /; " + mounts + "; "
        "mount -t tmpfs -o size=16m,mode=0777 none /tmp; mkdir -m 0777 /tmp/box; cd /tmp/box; "
        f"exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups --inh-caps=-all --bounding-set=-all "
        f"env -i HOME=/tmp/box PATH=/usr/bin:/bin {python} -I -S -B -"
    )


def run_program(source: str, limits: Limits = Limits(), hidden: list[str | os.PathLike] = ()) -> Outcome:
    """Run `source` (a whole Python program) in the sandbox. `hidden`: host paths the program must
    not see (the project root, results/); they are covered by empty mounts inside the sandbox."""
    ok, why = available()
    if not ok:
        raise LoopKVError(f"sandboxed execution is unavailable here: {why}")
    hidden_paths = [str(Path(p).resolve()) for p in hidden]
    for p in hidden_paths:
        if "'" in p:
            raise LoopKVError(f"cannot hide a path with a quote in it: {p}")
    command = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc",
               "sh", "-c", _inner_script(hidden_paths, _python())]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err,
                                preexec_fn=_limits_setter(limits), close_fds=True)
        try:
            proc.communicate(source.encode(), timeout=limits.timeout_s)
            status = "passed" if proc.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = "timeout"
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Outcome(passed=status == "passed", status=status, returncode=proc.returncode, seconds=seconds,
                       stdout=out.read(limits.output_kb * 1024).decode(errors="replace"),
                       stderr=err.read(limits.output_kb * 1024).decode(errors="replace"))
