"""The sandbox tests' leftover check (box_processes.py) sees exactly the box-user processes this test
process left, wherever they were reparented, and none that another process tree runs at the time."""
import os
import signal
import subprocess
import time

import pytest
from box_processes import BOX_UID, adopting_orphans, no_own_box_processes_left, own_box_processes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="starting processes as the box user needs root")

# a box-user process that forks a child into a session of its own and exits: the child is an orphan
# (its output goes nowhere, so the parent's pipes close when the parent exits)
ORPHAN = ("import os, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    null = os.open(os.devnull, os.O_RDWR)\n"
          "    for fd in (0, 1, 2):\n        os.dup2(null, fd)\n    time.sleep(60)\n"
          "else:\n    print(pid, flush=True)\n")


# the same orphan as this process's own user, its sleep in a PID namespace of its own: a box as the
# harness run by a normal user builds it (no change of user)
NAMESPACED = ORPHAN.replace("time.sleep(60)", "os.execvp('unshare', ['unshare', '--pid', '--fork', 'sleep', '60'])")


def _orphan(program: str = ORPHAN, **user) -> int:
    run = subprocess.run(["/usr/bin/python3", "-I", "-c", program], cwd="/", capture_output=True, text=True,
                         timeout=30, check=True, **(user or {"user": BOX_UID, "group": BOX_UID}))
    return int(run.stdout)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_an_orphan_of_this_process_is_found_and_its_end_is_seen():
    with adopting_orphans():
        pid = _orphan()
        try:
            assert own_box_processes() == [pid]
        finally:
            _kill(pid)
        assert no_own_box_processes_left()        # its zombie, adopted here, is reaped by the check


def test_a_box_user_process_of_another_tree_is_not_counted():
    pid = _orphan()                               # not adopting: it goes to an ancestor's reaper
    try:
        os.kill(pid, 0)                           # alive, running as the box user
        assert int(open(f"/proc/{pid}/status").read().split("Uid:")[1].split()[1]) == BOX_UID
        assert own_box_processes() == []
    finally:
        _kill(pid)


def test_a_process_in_another_pid_namespace_is_found_whatever_its_user():
    with adopting_orphans():
        unshare = _orphan(NAMESPACED, user=os.getuid())       # unshare, in this namespace, and its child
        deadline = time.monotonic() + 10
        while len(found := own_box_processes()) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)                                  # until unshare has forked its child
        try:
            assert len(found) == 1 and found[0] != unshare
            assert os.readlink(f"/proc/{found[0]}/ns/pid") != os.readlink("/proc/self/ns/pid")
        finally:
            _kill(unshare)                                    # its child dies with it (--fork: kill-child)
            for pid in found:
                _kill(pid)
        assert no_own_box_processes_left()
