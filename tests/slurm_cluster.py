"""A throw-away single-node SLURM cluster on this machine, for the submission integration test.

Needs root and Debian's slurmctld, slurmd, slurm-client and munge (``.ci/run`` installs them). The
configuration goes to /etc/slurm/slurm.conf, where job steps (srun inside sbatch) look for it; no
accounting database runs, so job states come from squeue, which keeps finished jobs for MinJobAge
(2 h here: longer than the tests, which look the jobs of a whole run up at its end).
Teardown ends exactly the daemons this module started, by their PIDs, and removes the config.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# weightdyn test cluster"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue")


def missing_requirements() -> str | None:
    """Why a local cluster cannot be started here, or None."""
    if os.geteuid() != 0:
        return "needs root"
    absent = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if absent:
        return f"missing {absent} (apt-get install slurmctld slurmd slurm-client munge)"
    if CONF.exists() and MARKER not in CONF.read_text():
        return f"{CONF} belongs to a real cluster"
    return None


def _config(root: Path, host: str, cpus: int, mem_mb: int) -> str:
    return f"""{MARKER}
ClusterName=weightdyn-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=7200
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _pid(path: Path, timeout: float = 20.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return int(path.read_text().split()[0])
        time.sleep(0.1)
    raise RuntimeError(f"no PID file {path}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class LocalSlurm:
    """Start with ``start()``; ``stop()`` ends the daemons it started (by PID)."""

    def __init__(self, root: Path, cpus: int = 2, mem_mb: int = 16000) -> None:
        self.root = root
        self.host = socket.gethostname()
        self.cpus, self.mem_mb = cpus, mem_mb
        self.pids: dict[str, int] = {}

    def start(self) -> None:
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        CONF.parent.mkdir(parents=True, exist_ok=True)
        CONF.write_text(_config(self.root, self.host, self.cpus, self.mem_mb))
        if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0:
            run_dir = Path("/run/munge")
            run_dir.mkdir(parents=True, exist_ok=True)
            shutil.chown(run_dir, "munge", "munge")
            subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
            self.pids["munged"] = _pid(run_dir / "munged.pid")
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([f"/usr/sbin/{daemon}"], check=True)
            self.pids[daemon] = _pid(self.root / f"{daemon}.pid")
        end = time.monotonic() + 60
        while time.monotonic() < end:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, check=False
            ).stdout
            if "idle" in out:
                return
            time.sleep(0.5)
        raise RuntimeError(f"node never became idle: {self.log_tail()}")

    def jobs(self) -> list[dict[str, str]]:
        """Every job the controller still knows (finished ones for MinJobAge seconds)."""
        out = subprocess.run(
            ["squeue", "-h", "--states=all", "-o", "%i|%j|%T|%k"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        keys = ("id", "name", "state", "comment")
        return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines() if line]

    def log_tail(self, lines: int = 30) -> str:
        path = self.root / "slurmctld.log"
        return "\n".join(path.read_text().splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        subprocess.run(["scancel", "--full", "--user", "root"], capture_output=True, check=False)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            os.kill(pid, signal.SIGTERM)
            end = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < end:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if CONF.exists() and MARKER in CONF.read_text():
            CONF.unlink()
