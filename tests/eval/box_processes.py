"""Which sandbox processes did *this* test process leave behind?

A host-wide `pgrep -u nobody` also sees the boxes of whatever else runs on the host (another pytest
worker's sandbox tests, a DAG's humaneval jobs), so the sandbox tests look only at their own: this
process is made a child subreaper while they run, so a box process that outlives its launcher is
reparented here instead of to the host's init, and a leftover is then any descendant of this one
that is a box's: running as the box user (the harness run as root hands the box to nobody) or in
another PID namespace (every box has its own; run as a normal user, its processes keep that user's
uid, so the uid alone would see nothing)."""
import ctypes
import os
import time
from contextlib import contextmanager

import pytest

BOX_UID = 65534            # the box user as the host sees it (nobody; the launcher's user namespace maps to it)
PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


@contextmanager
def adopting_orphans():
    """Orphans of this process's descendants come back to it (not to the host's init) meanwhile."""
    _set_subreaper(True)
    try:
        yield
    finally:
        _set_subreaper(False)


def _pid_namespace(pid: int | str) -> str | None:
    """The process's PID namespace, None where it cannot be read (a process that hides itself)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


@pytest.fixture(scope="module")
def own_orphans():
    """For a test module (import it there and `pytestmark = pytest.mark.usefixtures("own_orphans")`):
    a box process that outlives its launcher comes back to the module's process, where the checks look."""
    with adopting_orphans():
        yield


def _processes() -> dict[int, tuple[int, str, set[int], str | None]]:
    """pid -> (parent pid, state, uids: real, effective, saved, filesystem, PID namespace) of every
    process readable now."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            status = open(f"/proc/{entry}/status").read()
        except OSError:                     # gone meanwhile
            continue
        fields = stat.rpartition(")")[2].split()
        uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        found[int(entry)] = (int(fields[1]), fields[0], {int(u) for u in uids}, _pid_namespace(entry))
    return found


def own_box_processes(uid: int = BOX_UID) -> list[int]:
    """Descendants of this process that are a box's: running as `uid` (any of its four uids) or
    not in this process's PID namespace. Zombies that are this process's own children (adopted
    orphans that exited) are reaped first: they are gone but for the pid, and nothing else will
    collect them."""
    me, mine, table = os.getpid(), _pid_namespace("self"), _processes()

    def boxed(entry) -> bool:   # a zombie has no namespace left to read: its uid decides
        return uid in entry[2] or (entry[1] != "Z" and entry[3] != mine)

    for pid, entry in table.items():
        if entry[0] == me and entry[1] == "Z" and boxed(entry):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, entry in table.items():
        children.setdefault(entry[0], []).append(pid)
    left, frontier = [], list(children.get(me, []))
    while frontier:
        pid = frontier.pop()
        if boxed(table[pid]):
            left.append(pid)
        frontier.extend(children.get(pid, []))
    return sorted(left)


def no_own_box_processes_left(within_s: float = 3.0) -> bool:
    """Killed namespaces are torn down by the kernel asynchronously: poll briefly."""
    deadline = time.monotonic() + within_s
    while own_box_processes():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
