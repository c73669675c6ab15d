"""Hostile programs against the sandbox: each is an attack that runs to its end (and so would pass)
only if the box leaks; every one must be scored a failure, and the host is checked afterwards:
no file, socket, SysV segment or process of the attack left, nothing outside the allow-list seen."""
import os
import re
import signal
import socket
import textwrap
import time
from pathlib import Path

import pytest
from box_processes import own_box_processes, own_orphans  # noqa: F401 (a fixture)

from loopkv.eval.sandbox import Limits, allow_list, available, run_program

OK, WHY = available()
pytestmark = [pytest.mark.skipif(not OK, reason=f"sandbox unavailable on this machine: {WHY}"),
              pytest.mark.usefixtures("own_orphans")]
LIMITS = Limits(timeout_s=4, cpu_s=2, memory_mb=256, output_kb=64, disk_kb=4096, inodes=256)
MARK = "loopkv-attack"
SHARED_DIRS = ("/dev/shm", "/var/tmp", "/run/lock", "/var/lock", "/tmp")
SECRET = "the host's secret"

# ctypes preamble for the attacks that call libc directly (it is in the box: the stdlib's _ctypes)
LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def _sysv(kind: str) -> set[str]:
    path = Path(f"/proc/sysvipc/{kind}")
    return set(path.read_text().splitlines()[1:]) if path.exists() else set()


def _attack_files() -> set[str]:
    found = set()
    for d in SHARED_DIRS:
        if os.path.isdir(d):
            found |= {f"{d}/{n}" for n in os.listdir(d) if MARK in n}
    return found


def host_state() -> dict:
    return {"files": _attack_files(), "shm": _sysv("shm"), "msg": _sysv("msg"), "sem": _sysv("sem"),
            "sockets": {line for line in Path("/proc/net/unix").read_text().splitlines() if MARK in line},
            "box_processes": own_box_processes()}


def settled_host_state(before: dict, within_s: float = 3.0) -> dict:
    """Killed namespaces are torn down asynchronously: poll briefly until the host is back."""
    deadline = time.monotonic() + within_s
    while (state := host_state()) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    return state


@pytest.fixture
def host(tmp_path, monkeypatch):
    """The host as an attack would like to find it: a secret file in the project, a secret in the
    environment, a UNIX socket and an abstract socket listening, a TCP port on loopback."""
    (tmp_path / "secret.txt").write_text(SECRET)
    monkeypatch.setenv("LOOPKV_SECRET", SECRET)
    listeners = []
    unix_path = f"/tmp/{MARK}-host-{os.getpid()}.sock"
    for address in (unix_path, f"\0{MARK}-host-{os.getpid()}"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(address)
        s.listen()
        s.setblocking(False)
        listeners.append(s)
    os.chmod(unix_path, 0o777)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    tcp.setblocking(False)
    listeners.append(tcp)
    before = host_state()
    yield {"project": tmp_path, "unix": unix_path, "abstract": f"{MARK}-host-{os.getpid()}",
           "tcp": tcp.getsockname()[1], "listeners": listeners}
    accepted = []
    for s in listeners:
        try:
            accepted.append(s.accept())
        except BlockingIOError:
            pass
        s.close()
    os.unlink(unix_path)
    before["files"].discard(unix_path)
    before["sockets"] = {line for line in before["sockets"] if MARK + "-host" not in line}
    after = settled_host_state(before)
    assert not accepted, "a host listener was reached from the box"
    assert after == before, "the box left something on the host"


def attacks(h: dict) -> dict[str, str]:
    project, secret_file = h["project"], h["project"] / "secret.txt"
    return {
        # early exits and forged verdicts
        "sys_exit_0": "import sys\nsys.exit(0)",
        "os_exit_0": "import os\nos._exit(0)",
        "kill_self": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "forge_verdict_fd": "import os\nos.write(3, b'0' * 32)\nos._exit(0)",
        "read_token_from_stdin": "import sys\nassert sys.stdin.buffer.read(32)",
        "atexit_exit_0": "import atexit, os\natexit.register(lambda: os._exit(0))\nraise ValueError",
        # host files and secrets
        "read_project_secret": f"assert {SECRET!r} in open({str(secret_file)!r}).read()",
        "list_project": f"import os\nassert os.listdir({str(project)!r})",
        "read_passwd": "assert open('/etc/passwd').read()",
        "read_work": "import os\nassert os.listdir('/work') or os.listdir('/root') or os.listdir('/home')",
        "read_proc": "assert open('/proc/1/environ', 'rb').read() or open('/proc/self/mountinfo').read()",
        "read_sys": "import os\nassert os.listdir('/sys')",
        "env_secret": f"import os\nassert os.environ.get('LOOPKV_SECRET') == {SECRET!r}",
        "sees_more_than_allow_list": "import os\nassert set(os.listdir('/')) - {'dev', 'lib', 'lib64', 'tmp', 'usr'} "
                                     "or os.path.exists('/usr/share') or os.path.exists('/usr/local')",
        # writing where the host would keep it
        "dev_shm_100mb": f"open('/dev/shm/{MARK}', 'wb').write(b'x' * 100 * 2**20)",
        "var_tmp": f"open('/var/tmp/{MARK}', 'w').write('x')",
        "run_lock": f"open('/run/lock/{MARK}', 'w').write('x')\nopen('/var/lock/{MARK}', 'w').write('x')",
        "write_usr": f"open('/usr/{MARK}', 'w').write('x')",
        "write_root_of_box": f"open('/{MARK}', 'w').write('x')",
        "plant_symlink": f"import os\nos.symlink('/etc/passwd', '/tmp/{MARK}')\nassert open('/tmp/{MARK}').read()",
        "shared_memory_module": "from multiprocessing import shared_memory\nshared_memory.SharedMemory(create=True, size=2**20)",
        # IPC, sockets, network
        "sysv_shm_segment": LIBC + "assert libc.shmget(0x1ead, 1 << 20, 0o1666) >= 0\nassert False, 'not contained'",
        "sysv_msg_queue": LIBC + "assert libc.msgget(0x1eae, 0o1666) >= 0\nassert False, 'not contained'",
        "unix_socket_of_host": f"import socket\nsocket.socket(socket.AF_UNIX).connect({h['unix']!r})",
        "abstract_socket_of_host": f"import socket\nsocket.socket(socket.AF_UNIX).connect('\\0{h['abstract']}')",
        "tcp_loopback_of_host": f"import socket\nsocket.create_connection(('127.0.0.1', {h['tcp']}), timeout=1)",
        "outbound_network": "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)",
        # processes and privileges
        "fork_bomb": "import os\nwhile True:\n    os.fork()",
        "thread": "import threading\nt = threading.Thread(target=print)\nt.start()\nt.join()",
        "children_hold_memory": "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        x = bytearray(400 * 2**20)\n",
        "exec_shell": "import os\nos.execv('/bin/sh', ['sh', '-c', 'true'])",
        "kill_everything": "import os, signal\nfor pid in range(2, 4096):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
                           "    except OSError:\n        pass\nassert False, 'nothing to kill is expected'",
        "escape_the_timeout": LIBC + "libc.prctl(1, 0, 0, 0, 0)\nos.setsid()\nimport time\ntime.sleep(60)",
        "mount_tmpfs": LIBC + "assert libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0",
        "chroot": LIBC + "assert libc.chroot(b'/tmp') == 0",
        "mknod": "import os, stat\nos.mknod('/tmp/disk', stat.S_IFBLK | 0o600, os.makedev(8, 0))",
        "sethostname": "import socket\nsocket.sethostname('owned')",
        "new_userns_remount_rw": LIBC + "assert libc.unshare(0x10000000 | 0x00020000) == 0\n"
                                 "assert libc.mount(None, b'/usr', None, 32 | 4096, None) == 0\n"
                                 f"open('/usr/{MARK}', 'w').write('x')",
        # PTRACE_SEIZE does not stop PID 1 (an attach would, and the run would time out for that)
        "ptrace_pid_1": LIBC + "assert libc.ptrace(0x4206, os.getppid(), 0, 0) == 0",
        "nested_user_namespace": LIBC + "assert libc.unshare(0x10000000) == 0",
        "token_from_the_judges_globals": "import __main__, os\nos.write(3, __main__.token)\nos._exit(0)",
        # resources
        "memory_hog": "x = bytearray(2 * 2**30)",
        "fill_tmp": "open('/tmp/big', 'wb').write(b'x' * 64 * 2**20)",
        "inode_flood": "for i in range(100000):\n    open(f'/tmp/f{i}', 'w').close()",
        "output_flood": "while True:\n    print('x' * 4096)",
        "fd_flood": "fs = [open('/dev/null') for _ in range(100000)]",
        "cpu_spin": "while True:\n    pass",
        "sleep_past_wall_clock": "import time\ntime.sleep(60)",
    }


def test_at_least_thirty_attacks_are_all_contained_and_scored_failures(host):
    programs = attacks(host)
    assert len(programs) >= 30
    outcomes = {name: run_program(source, LIMITS, hidden=[host["project"]]) for name, source in programs.items()}
    passed = sorted(name for name, o in outcomes.items() if o.passed)
    assert passed == [], {name: outcomes[name].stdout[-300:] for name in passed}
    assert all(SECRET not in o.stdout + o.stderr for o in outcomes.values())


def test_one_run_cannot_see_what_another_left():
    left = run_program(f"open('/tmp/{MARK}', 'w').write('from run 1')\nprint(open('/tmp/{MARK}').read())", LIMITS)
    assert left.passed and "from run 1" in left.stdout
    assert not run_program(f"assert open('/tmp/{MARK}').read()", LIMITS).passed
    assert not os.path.exists(f"/tmp/{MARK}")


def _names_on_the_way(path: str) -> set[str]:
    """Every name the kernel passes through resolving `path` on the host: each prefix, each
    symlink, and the prefixes of every symlink's target, down to the real file."""
    names, parts, current = set(), [p for p in path.split("/") if p], ""
    for i, part in enumerate(parts):
        current = f"{current}/{part}"
        names.add(current)
        if os.path.islink(current):
            target = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
            rest = "/".join(parts[i + 1:])
            return names | _names_on_the_way(target + ("/" + rest if rest else ""))
    return names


def test_the_box_holds_only_the_allow_list():
    """Every name the box can see is on the way to the interpreter, its stdlib (whole directories)
    or a library it loads, a device or the box's own /tmp: a walk of the box's tree finds nothing else."""
    walk = ("import os\nfor d, dirs, files in os.walk('/'):\n    for n in dirs + files:\n"
            "        print(os.path.join(d, n))")
    outcome = run_program(walk, Limits(timeout_s=20, cpu_s=15, output_kb=16384))
    assert outcome.passed
    allowed = allow_list("/usr/bin/python3")
    on_the_way = set().union(*(_names_on_the_way(p) for p in allowed))
    whole_dirs = tuple(os.path.realpath(p) + "/" for p in allowed if os.path.isdir(p))
    seen = outcome.stdout.split()
    outside = [p for p in seen if p not in on_the_way and not p.startswith(whole_dirs)
               and not re.fullmatch(r"/dev|/dev/(null|zero|random|urandom)|/tmp", p)]
    assert outside == []
    assert any(p.endswith("/os.py") for p in seen) and not any(p.startswith(("/etc", "/work", "/root")) for p in seen)


def test_the_whole_run_is_one_process_so_its_memory_limit_holds_for_all_of_it():
    """Children were allowed before and held 3 x 400 MB against a 512 MB limit; now no second
    process or thread can start, and one allocation past the limit fails."""
    fork = run_program("import os\nos.fork()", LIMITS)
    assert not fork.passed and "BlockingIOError" in fork.stderr
    thread = run_program("import threading\nthreading.Thread(target=print).start()", LIMITS)
    assert not thread.passed and "can't start new thread" in thread.stderr
    big = run_program("x = bytearray(300 * 2**20)", LIMITS)
    assert not big.passed and "MemoryError" in big.stderr
    assert run_program("x = bytearray(64 * 2**20)\nprint(len(x))", LIMITS).passed
