"""What the sampler costs: its own CPU time at 100 Hz as % of one core, beside the floor of a
process that only wakes up at the same rate (``scripts/bench_sampler_overhead.py`` parses its
options and prints :func:`measure`; its docstring says how to read the figures).
"""
from __future__ import annotations

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


def measure(targets: int = 3, sockets: int = 4, seconds: float = 10.0, period: float = 0.01) -> dict:
    """The sampler's own CPU time over ``seconds`` of sampling ``targets`` worker-like processes
    (``sockets`` loopback TCP connections each) every ``period`` s, as % of one core, with the
    read spans (us), the host's load meanwhile and the idle wake-up floor."""
    srv = socket.create_server(("127.0.0.1", 0), backlog=256)
    srv.setblocking(False)
    peers = []
    workers = []
    try:
        for _ in range(targets):
            w = subprocess.Popen(
                [sys.executable, "-c", WORKER, str(srv.getsockname()[1]), str(sockets)],
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
        watched = [Target(f"worker{i}", w.pid) for i, w in enumerate(workers)]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.npz"
            sp = SamplerProcess(watched, out, period_s=period).start()
            clock = cpu_clock_id(sp.pid)
            cpu0, wall0 = time.clock_gettime_ns(clock), time.monotonic_ns()
            busy0, total0 = host_cpu_jiffies()
            deadline = time.monotonic() + seconds
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
                "targets": targets,
                "sockets_per_target": sockets,
                "period_s": period,
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
    result["idle_wakeup_floor_percent"] = wakeup_floor(period)
    return result
