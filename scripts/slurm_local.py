#!/usr/bin/env python
"""A one-machine Slurm cluster for the tests: munged, slurmctld and slurmd, all state in DIR.

    python scripts/slurm_local.py start --dir /tmp/driple-slurm    # prints SLURM_CONF=...
    SLURM_CONF=/tmp/driple-slurm/slurm.conf sinfo
    python scripts/slurm_local.py stop --dir /tmp/driple-slurm     # cancels jobs, stops daemons

Needs Debian's ``slurm-wlm`` and ``munge`` (``apt-get install slurm-wlm munge``) and root (slurmd
runs jobs as their users). ``start`` starts only the daemons not running (so it also restarts a
killed controller); ``stop`` ends only the daemons whose pid files are in DIR. The node is this
host with its CPUs and 80 % of its memory; one partition, ``local``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


def conf_text(d: Path, host: str, cpus: int, memory_mb: int) -> str:
    return "\n".join([
        "ClusterName=driple", f"SlurmctldHost={host}", "SlurmUser=root", "SlurmdUser=root",
        "SlurmctldPort=16817", "SlurmdPort=16818", "AuthType=auth/munge", f"AuthInfo=socket={d}/munge.sock",
        "CredType=cred/munge", f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool",
        f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.pid",
        f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "SchedulerType=sched/builtin", "ReturnToService=2",
        "MpiDefault=none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none", "MinJobAge=3600",
        f"NodeName={host} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName=local Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""])


def pid_of(d: Path, daemon: str) -> int | None:
    try:
        pid = int((d / f"{daemon}.pid").read_text().split()[0])
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError, IndexError):
        return None


def start(d: Path) -> int:
    missing = [b for b in DAEMONS if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]
    if missing:
        print(f"slurm_local: {', '.join(missing)} not installed (apt-get install slurm-wlm munge)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("slurm_local: slurmd needs root", file=sys.stderr)
        return 2
    for sub in ("state", "spool"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    conf = d / "slurm.conf"
    if not conf.exists():
        import psutil

        mem = int(psutil.virtual_memory().total / 2**20 * 0.8)
        conf.write_text(conf_text(d, socket.gethostname().split(".")[0], os.cpu_count() or 1, mem))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    commands = {
        "munged": ["munged", "-f", "-S", f"{d}/munge.sock", "--key-file", "/etc/munge/munge.key",
                   "--log-file", f"{d}/munged.log", "--pid-file", f"{d}/munged.pid", "--seed-file", f"{d}/munged.seed"],
        "slurmctld": ["slurmctld", "-f", str(conf)],
        "slurmd": ["slurmd", "-f", str(conf)],
    }
    for daemon in DAEMONS:
        if pid_of(d, daemon) is None:
            subprocess.run(commands[daemon], env=env, check=True, capture_output=True)
    for _ in range(60):  # until the node takes jobs
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip() in ("idle", "alloc", "mix"):
            print(f"SLURM_CONF={conf}")
            return 0
        time.sleep(0.5)
    print(f"slurm_local: the node did not come up; see {d}/slurmctld.log and {d}/slurmd.log", file=sys.stderr)
    return 1


def stop(d: Path) -> int:
    conf = d / "slurm.conf"
    if pid_of(d, "slurmctld") is not None:
        subprocess.run(["scancel", "--full", "--quiet", "-p", "local"], env={**os.environ, "SLURM_CONF": str(conf)},
                       capture_output=True)
        time.sleep(1)
    for daemon in reversed(DAEMONS):
        pid = pid_of(d, daemon)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                if pid_of(d, daemon) is None:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["start", "stop"])
    p.add_argument("--dir", default="/tmp/driple-slurm", help="state, logs and slurm.conf (default /tmp/driple-slurm)")
    args = p.parse_args(argv)
    d = Path(args.dir).resolve()
    return start(d) if args.action == "start" else stop(d)


if __name__ == "__main__":
    raise SystemExit(main())
