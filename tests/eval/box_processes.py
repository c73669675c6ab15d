"""Which sandbox processes did *this* test process leave behind?

A host-wide `pgrep -u nobody` also sees the boxes of whatever else runs on the host (another pytest
worker's sandbox tests, a DAG's humaneval jobs), so the sandbox tests look only at their own: this
process is made a child subreaper while they run, so a box process that outlives its launcher is
reparented here instead of to the host's init, and a leftover is then any process of the box user
descended from this one."""
import ctypes
import os
import time
from contextlib import contextmanager

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


def _processes() -> dict[int, tuple[int, str, set[int]]]:
    """pid -> (parent pid, state, uids: real, effective, saved, filesystem) of every process readable now."""
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
        found[int(entry)] = (int(fields[1]), fields[0], {int(u) for u in uids})
    return found


def own_box_processes(uid: int = BOX_UID) -> list[int]:
    """Processes running as `uid` (any of its four uids) descended from this process. Zombies that
    are this process's own children (adopted orphans that exited) are reaped first: they are gone
    but for the pid, and nothing else will collect them."""
    me, table = os.getpid(), _processes()
    for pid, (parent, state, uids) in table.items():
        if parent == me and state == "Z" and uid in uids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    left, frontier = [], list(children.get(me, []))
    while frontier:
        pid = frontier.pop()
        if uid in table[pid][2]:
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
