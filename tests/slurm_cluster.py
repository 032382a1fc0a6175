"""A whole SLURM cluster on this machine, for the slurm tier: munge, MariaDB (for sacct, which submitit
polls), slurmdbd, slurmctld and one slurmd, each started in the foreground from a generated config in one
temporary folder, and stopped by the PIDs started here. Nothing is written outside that folder.

`LocalCluster.missing()` names what is not installed (Debian: slurm-wlm slurmdbd munge mariadb-server;
`make slurm-packages` installs them); the tests skip with that line.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = {"munged": "munge", "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "slurmdbd": "slurmdbd",
           "mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server", "sbatch": "slurm-client",
           "sacctmgr": "slurm-client"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")


class LocalCluster:
    """`with LocalCluster() as c:` a one-node cluster (partition `debug`, this machine's cores) whose clients
    read `c.env` (SLURM_CONF): pass it to every subprocess that calls sbatch, squeue, sacct or scontrol."""

    def __init__(self, cpus: int | None = None, memory_mb: int = 16000):
        self.cpus = cpus or os.cpu_count() or 1
        self.memory_mb = memory_mb
        self.procs: dict[str, subprocess.Popen] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="goose-slurm-", dir="/tmp"))  # short: unix socket paths
        self.node = socket.gethostname().split(".")[0]

    @staticmethod
    def missing() -> str | None:
        if os.geteuid() != 0:
            return "the local SLURM cluster runs its daemons as root (this user is not)"
        absent = sorted({pkg for exe, pkg in DAEMONS.items() if _which(exe) is None})
        if absent:
            return (f"SLURM is not installed (Debian packages {' '.join(absent)}): "
                    "`make slurm-packages` installs them")
        return None

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf")}

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- starting ---------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.dir / f"{name}.out", "wb")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}:\n"
                                       + self.log(name))
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}:\n" + "\n".join(self.log(n) for n in self.procs))

    def log(self, name: str) -> str:
        out = [p for p in (self.dir / f"{name}.out", self.dir / f"{name}.log") if p.exists()]
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in out)

    def start(self) -> None:
        d = self.dir
        for sub in ("munge", "db", "state", "spool"):
            (d / sub).mkdir()
        (d / "munge").chmod(0o755)  # clients need to reach the socket
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = d / "munge" / "munge.socket"
        self._spawn("munged", [_which("munged"), "--foreground", "--force", f"--key-file={key}",
                               f"--socket={self.munge_socket}", f"--pid-file={d / 'munge' / 'munged.pid'}",
                               f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'munge' / 'seed'}"])
        self._wait("munged", self.munge_socket.exists)

        self.db_port = _free_port()
        subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={d / 'db'}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        self._spawn("mariadbd", [_which("mariadbd"), "--no-defaults", f"--datadir={d / 'db'}", "--user=root",
                                 f"--socket={d / 'db.sock'}", f"--port={self.db_port}", "--bind-address=127.0.0.1",
                                 f"--pid-file={d / 'db.pid'}", "--skip-grant-tables",
                                 f"--log-error={d / 'mariadbd.log'}"])
        self._wait("MariaDB", lambda: _listening(self.db_port))

        self.dbd_port, self.ctld_port, self.slurmd_port = _free_port(), _free_port(), _free_port()
        self._write_configs()
        self._spawn("slurmdbd", [_which("slurmdbd"), "-D"])
        self._wait("slurmdbd", lambda: _listening(self.dbd_port))
        self.run(_which("sacctmgr"), "-i", "add", "cluster", "goose")
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i"])
        self._wait("slurmctld", lambda: _listening(self.ctld_port))
        self._spawn("slurmd", [_which("slurmd"), "-D", "-N", self.node])
        self._wait("the node to be idle", lambda: "idle" in self.sinfo(), timeout=90)

    def _write_configs(self) -> None:
        d = self.dir
        auth = f"AuthType=auth/munge\nAuthInfo=socket={self.munge_socket}\n"
        (d / "slurm.conf").write_text(
            f"ClusterName=goose\nSlurmctldHost={self.node}(127.0.0.1)\n{auth}CredType=cred/munge\n"
            f"SlurmctldPort={self.ctld_port}\nSlurmdPort={self.slurmd_port}\n"
            "SlurmUser=root\nSlurmdUser=root\n"
            f"StateSaveLocation={d / 'state'}\nSlurmdSpoolDir={d / 'spool'}\n"
            f"SlurmctldPidFile={d / 'slurmctld.pid'}\nSlurmdPidFile={d / 'slurmd.pid'}\n"
            f"SlurmctldLogFile={d / 'slurmctld.log'}\nSlurmdLogFile={d / 'slurmd.log'}\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\nSwitchType=switch/none\n"
            "SlurmdParameters=config_overrides\nReturnToService=2\nJobRequeue=1\n"
            "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU_Memory\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/slurmdbd\n"
            f"AccountingStorageHost=127.0.0.1\nAccountingStoragePort={self.dbd_port}\n"
            f"AccountingStoragePass={self.munge_socket}\n"  # with slurmdbd: the munge socket to reach it by
            "InactiveLimit=0\nKillWait=5\nMinJobAge=600\nSlurmctldTimeout=30\nSlurmdTimeout=30\n"
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN\n"
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP\n")
        dbd = d / "slurmdbd.conf"
        dbd.write_text(
            f"{auth}DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort={self.dbd_port}\nSlurmUser=root\n"
            f"LogFile={d / 'slurmdbd.log'}\nPidFile={d / 'slurmdbd.pid'}\n"
            "StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\n"
            f"StoragePort={self.db_port}\nStorageUser=root\nStorageLoc=slurm_acct_db\n")
        dbd.chmod(0o600)

    # -- using ------------------------------------------------------------------------------------------
    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def sinfo(self) -> str:
        return self.run("sinfo", "-h", "-o", "%T", check=False)

    def jobs(self) -> list[dict[str, str]]:
        """The queue: id (array ids as 12_0), state, name."""
        out = self.run("squeue", "-h", "-o", "%i|%T|%j")
        return [dict(zip(("id", "state", "name"), line.split("|"))) for line in out.splitlines() if line]

    # -- stopping ---------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Each daemon started here, last first: SIGTERM, then SIGKILL after 15 s; then the folder."""
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(5)
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
