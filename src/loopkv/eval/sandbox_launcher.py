"""The sandbox's launcher: builds one run's box and executes the program in it.

Run by the harness (eval/sandbox.py) as `python3 -I -S -c <this file's text> <plan JSON>`, with
the host's unprivileged user (root drops to `nobody` first), so it is stdlib only and imports
nothing of loopkv. Steps, each needing no privilege on the host:
1. new user, PID, network, IPC, UTS, cgroup and mount namespaces (the user namespace grants the
   capabilities the rest needs, inside the box only); the box's user is 65534;
2. a fork: the child is PID 1 of the box (so when it exits, or is killed, every process in the
   box dies with it); it builds the box, drops every capability and starts the program as PID 2;
3. a fresh root on an empty tmpfs: only the plan's allow-list (the interpreter, its stdlib and the
   shared libraries they load) bound read-only, /dev/{null,zero,random,urandom}, an empty
   size-limited tmpfs at /tmp (the only writable place); the host's root is detached (pivot_root);
4. PID 1 drops every capability, becomes non-dumpable (the program cannot ptrace it), forbids
   nested user namespaces and takes the limits the program inherits: no children and no threads
   at all (RLIMIT_NPROC counts this user namespace's processes), so the address-space limit bounds
   the whole run; CPU seconds, open files, file size (its stdout / stderr are files), no core
   dumps, no new privileges; then it signals "ready" and starts the program, an unprivileged user
   holding no capability.
The judge runs next to the program in the interpreter (DRIVER): it reads the per-run token and the
program from stdin, closes stdin, runs the program, and only if the program returned writes the
token to fd 3, the verdict channel. An early exit, a signal or a SystemExit never writes it.
"""
import ctypes
import json
import os
import platform
import signal
import sys

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}
BOX_USER = 65534
VERDICT_FD = 3

# statvfs flag -> mount flag: flags the kernel locks on a mount made in a user namespace must be
# kept when it is remounted read-only (bubblewrap does the same).
_LOCKED = ((os.ST_RDONLY, MS_RDONLY), (os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV),
           (os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
           (os.ST_RELATIME, MS_RELATIME))

# The judge keeps the token in its frame only (not in any module's globals) and runs the program
# in a fresh namespace; sys.exit / SystemExit and every other exception are failures.
DRIVER = r"""
def judge():
    import os, sys
    token, _, program = sys.stdin.buffer.read().partition(b"\n")
    os.close(0)
    try:
        exec(compile(program, "<program>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        passed = True
    except BaseException:
        import traceback
        traceback.print_exc()
        passed = False
    sys.stdout.flush()
    sys.stderr.flush()
    if passed:
        os.write(3, token)
    os._exit(0 if passed else 1)
judge()
"""

libc = ctypes.CDLL(None, use_errno=True)


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces():
    """New namespaces for this process (its children land in the new PID namespace); map the
    host user to the box user."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
    _check(libc.unshare(flags), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{BOX_USER} {uid} 1\n")
    _write("/proc/self/gid_map", f"{BOX_USER} {gid} 1\n")


def _mirror(root, path):
    """Make `path` resolve inside `root` as it does on the host: the symlinks on its way are copied,
    the file or directory it ends at is bound read-only. Returns nothing; raises on failure."""
    parts = [p for p in path.split("/") if p]
    host = ""
    for i, part in enumerate(parts):
        host = f"{host}/{part}"
        inside = root + host
        if os.path.islink(host):
            target = os.readlink(host)
            if not os.path.lexists(inside):
                os.symlink(target, inside)
            rest = "/".join(parts[i + 1:])
            resolved = os.path.normpath(os.path.join(os.path.dirname(host), target))
            _mirror(root, resolved + ("/" + rest if rest else ""))
            return
        if i < len(parts) - 1:
            if not os.path.isdir(inside):
                os.mkdir(inside, 0o755)
            continue
        _bind_read_only(host, inside)


def _bind_read_only(host, inside):
    if os.path.ismount(inside) or (os.path.exists(inside) and os.stat(inside).st_dev != os.stat(os.path.dirname(inside)).st_dev):
        return   # bound already (two allow-list entries share a path)
    if os.path.isdir(host):
        os.makedirs(inside, 0o755, exist_ok=True)
    else:
        open(inside, "w").close()
    _mount(host, inside, None, MS_BIND)   # not recursive: mounts below an allowed path stay out
    locked = 0
    st = os.statvfs(host)
    for stat_flag, mount_flag in _LOCKED:
        if st.f_flag & stat_flag:
            locked |= mount_flag
    _mount(None, inside, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | locked)


def build_root(plan):
    """The box's filesystem, then pivot into it."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = plan["root_mount"]
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    for path in plan["allow"]:
        _mirror(root, path)
    os.makedirs(root + "/dev", 0o755, exist_ok=True)
    for name in ("null", "zero", "random", "urandom"):
        open(f"{root}/dev/{name}", "w").close()
        _mount(f"/dev/{name}", f"{root}/dev/{name}", None, MS_BIND)
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={plan['disk_kb']}k,nr_inodes={plan['inodes']},mode=1777")
    os.mkdir(root + "/.old")
    os.chdir(root)
    number = PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(0, f"pivot_root: unknown syscall number on {platform.machine()}")
    _check(libc.syscall(ctypes.c_long(number), b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "umount /.old")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir("/tmp")
    libc.sethostname(b"box", 3)


def apply_limits(plan):
    """In PID 1, inherited by the program. The launcher's three processes (the first, PID 1 and the
    program) are all this user namespace may hold: neither can start another process or thread,
    so the address-space limit bounds the whole run."""
    import resource
    limits = plan["limits"]
    for name, value in ((resource.RLIMIT_NPROC, 3), (resource.RLIMIT_CPU, limits["cpu_s"]),
                        (resource.RLIMIT_AS, limits["memory_mb"] * 2**20),
                        (resource.RLIMIT_FSIZE, limits["output_kb"] * 1024),
                        (resource.RLIMIT_NOFILE, limits["open_files"]), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(name, (value, value))


def no_nested_user_namespaces():
    """The box's user namespace may hold no other: generated code gets no capability anywhere,
    not even in a namespace of its own (the per-namespace limit; read through the host's /proc
    before the pivot)."""
    _write("/proc/sys/user/max_user_namespaces", "0")


def drop_and_exec(plan):
    os.closerange(VERDICT_FD + 1, 1 << 16)
    os.execve(plan["python"], [plan["python"], "-I", "-S", "-B", "-c", DRIVER],
              {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"})


def drop_capabilities():
    """PID 1 keeps nothing the program lacks: no capability, no new privileges for its children."""
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break   # past the kernel's last capability
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)   # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()                   # effective, permitted, inheritable: all empty
    _check(libc.capset(header, data), "capset")


def run_box(plan):
    """PID 1 of the box: build it, start the program as PID 2 and wait for it. The program is not
    PID 1, so the signals it sends itself act as they do anywhere (init ignores them); when PID 1
    exits the kernel kills whatever is left in the box."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    no_nested_user_namespaces()
    build_root(plan)
    drop_capabilities()
    # not dumpable: the program (the same user) can neither ptrace PID 1 nor read its memory
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    apply_limits(plan)
    os.write(plan["ready_fd"], b"R")   # the box is built: what fails from here is the program's
    os.close(plan["ready_fd"])
    program = os.fork()
    if program == 0:
        if plan["verdict_fd"] != VERDICT_FD:
            os.dup2(plan["verdict_fd"], VERDICT_FD)
            os.close(plan["verdict_fd"])
        drop_and_exec(plan)
    os.close(plan["verdict_fd"])
    os.close(0)
    _, status = os.waitpid(program, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def main():
    plan = json.loads(sys.argv[1])
    try:
        enter_namespaces()
        _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    except OSError as e:
        print(f"sandbox: {e}", file=sys.stderr)
        os._exit(125)
    box = os.fork()
    if box == 0:
        try:
            run_box(plan)
        except BaseException as e:   # the box could not be built: say why, never run the program
            print(f"sandbox: {e}", file=sys.stderr)
        os._exit(125)
    os.close(plan["verdict_fd"])
    os.close(plan["ready_fd"])
    os.close(0)
    _, status = os.waitpid(box, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    main()
