"""Measure the same jobs at two host speeds: as the host is, then under a cgroup CPU quota.

    python scripts/collect_drift.py --grid datasets/v2/cpu-ddp-w2-lo-retest/grid.yaml \
        --out datasets/v2/cpu-ddp-w2-lo-drift --quota 1.0

writes ``OUT/normal`` and ``OUT/quota<Q>``, two collector datasets of the same grid; every row
carries the hardware spec probed before its job, so the quota (``cores_available``) is in the
rows. Run as root on a quiet host. The quota's cgroup (v1 ``cpu`` or v2) is made for the run and
removed after it, also on Ctrl-C. Resumable: run it again and the sweeps skip finished jobs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


def make_cgroup(name: str, cores: float) -> Path:
    """A cgroup allowing ``cores`` cores (quota over a 100 ms period); v1 where mounted, else v2."""
    period = 100_000
    quota = int(round(cores * period))
    if V1.is_dir():
        group = V1 / name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(period))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    else:
        group = V2 / name
        group.mkdir(exist_ok=True)
        (group / "cpu.max").write_text(f"{quota} {period}")
    return group


def sweep(grid: str, out: Path, group: Path | None, extra: list[str]) -> int:
    cmd = [sys.executable, "-m", "driple", "collect", "sweep", "--grid", grid, "--out", str(out),
           "--allow-other-hardware", *extra]

    def enter():
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    print("$", " ".join(cmd), f"(in {group})" if group else "", flush=True)
    return subprocess.call(cmd, preexec_fn=enter)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", required=True, help="grid YAML (driple collect grid)")
    ap.add_argument("--out", required=True, help="folder for the two datasets")
    ap.add_argument("--quota", type=float, default=1.0, help="cores the slowed sweep may use (default 1)")
    ap.add_argument("sweep_args", nargs="*", help="more arguments for driple collect sweep (after --)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("collect_drift: a cgroup quota needs root", file=sys.stderr)
        return 2
    out = Path(args.out)
    extra = ["--overwrite-shipped", *args.sweep_args] if "datasets" in out.parts else list(args.sweep_args)
    rc = sweep(args.grid, out / "normal", None, extra)
    if rc != 0:
        return rc
    group = make_cgroup(f"driple-quota-{os.getpid()}", args.quota)
    try:
        return sweep(args.grid, out / f"quota{args.quota:g}", group, extra)
    finally:
        for pid in (group / "cgroup.procs").read_text().split():  # none should be left: say so
            print(f"collect_drift: process {pid} still in {group}", file=sys.stderr)
        try:
            group.rmdir()
        except OSError as exc:
            print(f"collect_drift: could not remove {group} ({exc})", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
