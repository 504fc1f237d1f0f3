"""Measure what the sampler costs: its own CPU time / wall time at 100 Hz, as % of one core.

Starts ``--targets`` idle worker-like processes, each holding ``--sockets`` loopback TCP
connections (so the tcp_info path is exercised) and one child process, samples them for
``--seconds`` and reads the sampler process's CPU clock before and after. Target: <= 3 %.
For scale it also measures the floor: a Python process that only wakes up at the same rate
(select with a timeout) and does nothing else -- on a small VM that alone costs ~1 %.
``host_busy_cores`` tells how loaded the host was meanwhile (all CPUs, from /proc/stat): the
sampler's own CPU time is what is measured, but on a busy host its caches are colder after
each sleep, which changes that time by a few tenths of a percent either way.
``native_reads`` tells whether the sampler used the C loop and reads (``_fastread``) or pure
Python (``DRIPLE_SAMPLER_NATIVE=0`` forces Python). On the 2-core dev VM, 3 targets x 4
sockets, 5 rounds interleaving the code before the C module, this code, and this code in
pure Python, on a host running a collection (0.7-1.4 busy cores): medians 2.95 %, 1.70 % and
3.13 % (read span p50 170, 95 and 180 us; floor 0.85-0.93 %). Single runs vary by +-0.3, so
compare interleaved runs. What is left is mostly kernel time: waking up, the 12 inet_diag
lookups (~75 us with cold caches) and the 6 CPU clock + statm reads (~40 us).

    /work/venv/bin/python scripts/bench_sampler_overhead.py [--targets 3] [--seconds 10] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from driple.collect.sampling import SamplerProcess, Target, read_raw
from driple.collect.sampling.proctree import cpu_clock_id
from driple.collect.sampling.sampler import host_cpu_jiffies

TARGET_PERCENT = 3.0

WORKER = r"""
import signal, socket, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the finally below
port, n = int(sys.argv[1]), int(sys.argv[2])
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("ok", flush=True)
try:
    while True:  # a trickle of traffic: 1 kB per socket every 50 ms
        for c in conns:
            c.sendall(b"x" * 1000)
        time.sleep(0.05)
finally:
    kid.kill()
    kid.wait()
"""


IDLE_LOOP = r"""
import os, select, sys, time
period, seconds = float(sys.argv[1]), float(sys.argv[2])
quiet, _keep = os.pipe()  # never readable, like the sampler's stdin
c0, t0 = time.process_time(), time.monotonic()
nxt = t0
while time.monotonic() - t0 < seconds:
    nxt += period
    select.select([quiet], [], [], max(nxt - time.monotonic(), 0))
print(100 * (time.process_time() - c0) / (time.monotonic() - t0))
"""


def wakeup_floor(period: float, seconds: float = 3.0) -> float:
    """CPU % of one core that a Python process spends just waking up every ``period`` s."""
    out = subprocess.run([sys.executable, "-c", IDLE_LOOP, str(period), str(seconds)],
                         capture_output=True, text=True, timeout=60)
    return round(float(out.stdout), 2)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=3)
    ap.add_argument("--sockets", type=int, default=4, help="TCP connections per target")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--period", type=float, default=0.01, help="sampling period, s")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)

    srv = socket.create_server(("127.0.0.1", 0), backlog=256)
    srv.setblocking(False)
    peers = []
    workers = []
    try:
        for _ in range(args.targets):
            w = subprocess.Popen(
                [sys.executable, "-c", WORKER, str(srv.getsockname()[1]), str(args.sockets)],
                stdout=subprocess.PIPE,
                text=True,
            )
            workers.append(w)
        for w in workers:
            w.stdout.readline()
        while True:  # accept and drain, so the workers' sends never block
            try:
                c, _ = srv.accept()
                c.setblocking(False)
                peers.append(c)
            except BlockingIOError:
                break
        targets = [Target(f"worker{i}", w.pid) for i, w in enumerate(workers)]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.npz"
            sp = SamplerProcess(targets, out, period_s=args.period).start()
            clock = cpu_clock_id(sp.pid)
            cpu0, wall0 = time.clock_gettime_ns(clock), time.monotonic_ns()
            busy0, total0 = host_cpu_jiffies()
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                for c in peers:
                    try:
                        while c.recv(1 << 16):
                            pass
                    except BlockingIOError:
                        pass
                time.sleep(0.05)
            cpu1, wall1 = time.clock_gettime_ns(clock), time.monotonic_ns()
            busy1, total1 = host_cpu_jiffies()
            sp.stop()
            raw = read_raw(out)
            spans = raw.arrays["sample/span_ns"] / 1e3
            result = {
                "targets": args.targets,
                "sockets_per_target": args.sockets,
                "period_s": args.period,
                "seconds": round((wall1 - wall0) / 1e9, 2),
                "samples": raw.meta["n_samples"],
                "late_samples": raw.meta["n_late"],
                "reread_samples": raw.meta["n_retried"],
                "native_reads": raw.meta.get("native_reads", False),
                "read_us_p50": round(float(np.percentile(spans, 50)), 1),
                "read_us_p99": round(float(np.percentile(spans, 99)), 1),
                "sampler_cpu_percent_of_one_core": round(100.0 * (cpu1 - cpu0) / (wall1 - wall0), 2),
                "target_percent": TARGET_PERCENT,
                "host_busy_cores": round((busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1), 2),
            }
    finally:
        for w in workers:
            w.terminate()
            w.wait()
        for c in peers:
            c.close()
        srv.close()
    result["within_target"] = result["sampler_cpu_percent_of_one_core"] <= TARGET_PERCENT
    result["idle_wakeup_floor_percent"] = wakeup_floor(args.period)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:34s} {v}")
    return result


if __name__ == "__main__":
    main()
