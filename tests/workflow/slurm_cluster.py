"""A single-node SLURM cluster on localhost for the workflow tests, from Debian's packages.

munge, MariaDB (a private data directory and port), slurmdbd (so `sacct` works), slurmctld and
slurmd are started by hand (no systemd) with their configuration in a scratch directory, and
stopped by pid. `ensure_installed()` installs the packages with apt when they are missing and the
process may (root); it returns why not otherwise, and the caller skips with that reason.
"""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ["slurmctld", "slurmd", "slurmdbd", "slurm-client", "munge", "mariadb-server"]
BINARIES = ["slurmctld", "slurmd", "slurmdbd", "sacct", "sacctmgr", "sbatch", "munged", "mariadbd",
            "mariadb-install-db", "mariadb"]
CLUSTER = "loopkv"
PARTITION = "local"        # CPUs only
GPU_PARTITION = "localgpu"  # the same node's GPUs: two counted GRES (no devices), for placement by the scheduler
CONF_DIR = Path("/etc/slurm")
MARKER = "# loopkv test cluster: written by tests/workflow/slurm_cluster.py, removed when it stops"
ACCOUNT = "loopkv"
DB_PORT = 3317


def _missing() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def ensure_installed() -> str | None:
    """None when the daemons are there (installing them if needed and possible), else why not."""
    if not _missing():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"SLURM daemons missing ({', '.join(_missing())}) and cannot be installed (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        update = subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        proc = subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return f"apt-get install {' '.join(PACKAGES)} failed: {(update.stderr + proc.stderr)[-500:]}"
    return None if not _missing() else f"still missing after install: {', '.join(_missing())}"


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class LocalSlurm:
    """Start with `start()`, stop with `stop()`; `env` points the clients at this cluster."""

    def __init__(self, root: Path, conf_dir: Path = CONF_DIR):
        self.root = Path(root)
        self.conf_dir = Path(conf_dir)
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.user = getpass.getuser()
        # the default location: the executor plugin drops SLURM_* variables (SLURM_CONF too) inside jobs
        self.env = {**os.environ, "SLURM_CONF": str(self.conf_dir / "slurm.conf")}

    def foreign_config(self) -> str | None:
        """Why this machine's SLURM configuration must not be replaced, or None."""
        for name in ("slurm.conf", "slurmdbd.conf", "gres.conf"):
            path = self.conf_dir / name
            if path.exists() and MARKER not in path.read_text(errors="replace"):
                return f"{path} is a real SLURM configuration (not a loopkv test cluster's); not replacing it"
        return None

    # ------------------------------------------------------------ configuration

    def _write_configs(self) -> None:
        r = self.root
        for d in ("state", "spool", "log", "db", "run"):
            (r / d).mkdir(parents=True, exist_ok=True)
        cpus = os.cpu_count() or 2
        memory = max(1024, int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20) - 1024)
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "slurm.conf").write_text(f"""{MARKER}
ClusterName={CLUSTER}
SlurmctldHost=localhost
SlurmUser={self.user}
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=16819
AccountingStoreFlags=job_comment
AccountingStorageTRES=gres/gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=300
SchedulerType=sched/backfill
NodeName=localhost CPUs={cpus} RealMemory={memory} Gres=gpu:2 State=UNKNOWN
PartitionName={PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName={GPU_PARTITION} Nodes=localhost MaxTime=INFINITE State=UP
""")
        # two stand-in GPU devices (any character devices): the scheduler counts and grants them
        (self.conf_dir / "gres.conf").write_text(f"{MARKER}\nAutoDetect=off\n"
                                                 "NodeName=localhost Name=gpu File=/dev/null\n"
                                                 "NodeName=localhost Name=gpu File=/dev/zero\n")
        dbd = self.conf_dir / "slurmdbd.conf"
        dbd.write_text(f"""{MARKER}
AuthType=auth/munge
DbdHost=localhost
DbdPort=16819
SlurmUser={self.user}
PidFile={r}/run/slurmdbd.pid
LogFile={r}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={DB_PORT}
StorageUser=slurm
StoragePass=loopkv
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)

    # ------------------------------------------------------------ daemons

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")
        proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc))

    def _wait(self, what: str, check, timeout: float = 60.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for {what}: "
                                       f"{(self.root / 'log' / f'{name}.out').read_text()[-2000:]}")
            if check():
                return
            time.sleep(0.5)
        raise TimeoutError(f"{what} not ready after {timeout:.0f} s; logs in {self.root / 'log'}")

    def _ok(self, *cmd: str) -> bool:
        return subprocess.run(cmd, env=self.env, capture_output=True).returncode == 0

    def _port_open(self, port: int) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    def start(self) -> "LocalSlurm":
        why = self.foreign_config()
        if why:
            raise RuntimeError(why)
        self._write_configs()
        r = self.root
        # munge: the packaged key; a private socket would need every client configured, so use the default
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        if not self._ok("munge", "-n"):
            self._spawn("munged", [_sbin("munged"), "-F", "--force"])
            self._wait("munge", lambda: self._ok("munge", "-n"), 20)
        # MariaDB in a private data directory, on its own port and socket
        subprocess.run(["mariadb-install-db", f"--datadir={r}/db", "--auth-root-authentication-method=normal",
                        f"--user={self.user}"], check=True, capture_output=True)
        self._spawn("mariadbd", [_sbin("mariadbd"), f"--datadir={r}/db", f"--port={DB_PORT}", "--bind-address=127.0.0.1",
                                 f"--socket={r}/run/mysqld.sock", f"--pid-file={r}/run/mariadbd.pid",
                                 f"--user={self.user}"])
        self._wait("MariaDB", lambda: self._port_open(DB_PORT), 60)
        sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'loopkv';"
               "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'loopkv';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
        subprocess.run(["mariadb", f"--socket={r}/run/mysqld.sock", "-uroot", "-e", sql], check=True, capture_output=True)
        self._spawn("slurmdbd", [_sbin("slurmdbd"), "-D"])   # reads slurmdbd.conf beside SLURM_CONF
        self._wait("slurmdbd", lambda: self._port_open(16819), 60)
        self._wait("cluster registration",
                   lambda: self._ok("sacctmgr", "-i", "add", "cluster", CLUSTER) or
                   CLUSTER in subprocess.run(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"],
                                             env=self.env, capture_output=True, text=True).stdout, 30)
        # an account for this user (the executor plugin checks the one it submits with)
        for cmd in (["sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER}"],
                    ["sacctmgr", "-i", "add", "user", self.user, f"account={ACCOUNT}", f"cluster={CLUSTER}"]):
            subprocess.run(cmd, env=self.env, capture_output=True)
        self._spawn("slurmctld", [_sbin("slurmctld"), "-D", "-i"])
        self._wait("slurmctld", lambda: self._ok("scontrol", "ping"), 60)
        self._spawn("slurmd", [_sbin("slurmd"), "-D", "-N", "localhost"])
        self._wait("an idle node", lambda: "idle" in subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True).stdout, 60)
        return self

    def stop(self) -> None:
        for name, proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        self.procs.clear()
        for name in ("slurm.conf", "slurmdbd.conf", "gres.conf"):
            path = self.conf_dir / name
            if path.exists() and MARKER in path.read_text(errors="replace"):
                path.unlink()

    FIELDS = ("id", "name", "state", "partition", "cpus", "tres", "comment")

    def accounted_jobs(self) -> list[dict]:
        """Every job sacct knows of: id, name, state, partition, requested CPUs, requested TRES
        (memory, GPUs), comment (the Snakemake rule)."""
        out = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-S", "2020-01-01", "-o",
                              "JobID,JobName,State,Partition,ReqCPUS,ReqTRES,Comment"],
                             env=self.env, capture_output=True, text=True, check=True).stdout
        return [dict(zip(self.FIELDS, line.split("|"))) for line in out.splitlines() if line]
