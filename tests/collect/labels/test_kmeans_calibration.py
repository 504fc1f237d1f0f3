"""Calibration: real samplers + labeller on workloads whose burst/idle pattern is known.

- CPU: a process busy for 150 ms of CPU time, then asleep 250 ms -> compute burst ~100 % of
  one core, burst 0.150 s, idle 0.250 s.
- Network: a TCP sender over loopback pushing 4 MB every 300 ms, paced at 40 MB/s (40 kB per
  ms) -> tx burst 0.100 s at 40 MB/s, idle 0.200 s, 4 MB per period; the receiver sees it as rx.

Both workloads jitter their idle phase by up to +-5 ms (mean unchanged). Without jitter a
workload locked to the 10 ms sampling grid would keep one phase for the whole run, and at the
worst phase a run gains or loses a whole edge sample (10 % of a 100 ms burst); real jobs drift.

The machine is shared: other people's processes would stretch a busy phase or delay a paced
send and make the *workload* wrong, not the instrument. So workloads and the sampler run
SCHED_FIFO (root); without that permission the tests are skipped. Even so the VM can lose its
CPU for a few ms: each workload logs its own timing, and a run in which the workload itself
was disturbed (a busy phase, sleep or paced send late by more than 3 ms, by its own clock) or
the sampler fell a period late is repeated, up to 3 times. The instrument is judged only on
runs where the workload did exactly what it claims.

Tolerance: 5 %, and never less than the sampler's resolution: a duration is counted in whole
samples, so one sample period (10 ms) either way. A figure outside it fails on a quiet host;
on a busy one (other processes using more than a quarter of a core, see ``HostLoad`` in
conftest.py) the run is repeated, and after 3 busy runs the test is skipped with the loads
measured in each.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from driple.collect.labels.kmeans import label_rates
from driple.collect.sampling import SamplerProcess, Target, read_raw

TOL = 0.05
LATE_NS = 3_000_000  # a workload step later than this (by its own clock) means it was disturbed
ATTEMPTS = 3

CPU_WORKLOAD = r"""
import random, sys, time
busy, idle, duration = map(float, sys.argv[1:4])
rng = random.Random(0)
sys.stdin.readline()  # "go"
t_end = time.monotonic() + duration
log = []
while time.monotonic() < t_end:
    a = time.monotonic_ns()
    c = time.thread_time() + busy  # CPU time, so preemption cannot shorten the burst
    while time.thread_time() < c:
        pass
    b = time.monotonic_ns()
    nap = idle + rng.uniform(-0.005, 0.005)
    time.sleep(nap)
    late = (b - a - busy * 1e9) + (time.monotonic_ns() - b - nap * 1e9)
    log.append((a, b, int(late)))
print(" ".join(f"{a},{b},{late}" for a, b, late in log), flush=True)
"""

RECEIVER = r"""
import socket
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
c, _ = srv.accept()
n = 0
while b := c.recv(1 << 20):
    n += len(b)
print(n, flush=True)
"""

SENDER = r"""
import random, socket, sys, time
port, total, period, rate, duration = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:6])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
step = 0.001  # pace: one chunk per ms
chunk = b"x" * int(rate * step)
sys.stdin.readline()  # "go"
t0 = time.monotonic() + 0.01
rng = random.Random(0)
k = 0
starts = []
worst = 0.0  # latest a chunk left after its scheduled time, s
while t0 + k * period + total / rate <= t0 + duration:
    start = t0 + k * period + rng.uniform(-0.005, 0.005)
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    starts.append(time.monotonic_ns())
    sent = j = 0
    while sent < total:
        due = start + j * step
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        n = min(len(chunk), total - sent)
        s.sendall(chunk[:n])
        worst = max(worst, time.monotonic() - due)
        sent += n
        j += 1
    k += 1
s.close()
print(" ".join(map(str, starts)), int(worst * 1e9), flush=True)
"""


def _fifo(pid: int, priority: int) -> None:
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        pytest.skip("calibration needs SCHED_FIFO (root) to run an exact workload on a shared host")


def _spawn(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _off(figures: dict) -> list[str]:
    """The figures ``{name: (measured, expected, tolerance)}`` outside their tolerance."""
    return [f"{k} {m:.4g} vs {e:.4g} +- {t:.2g}" for k, (m, e, t) in figures.items() if abs(m - e) > t]


def _judge(off: list[str], load, attempt: int, busy_runs: list[str]) -> bool:
    """True when the run passed; fails on a quiet host, records a busy run to try again."""
    if not off:
        return True
    if not load.busy:
        pytest.fail(f"attempt {attempt + 1}, quiet host ({load}): {'; '.join(off)}")
    busy_runs.append(f"{'; '.join(off)} ({load})")
    print("host busy, again:", busy_runs[-1])
    return False


def _run_cpu(out, busy, idle):
    """One run; returns (raw series, go time ns, phases [[start, end, late]]) ."""
    work = _spawn(CPU_WORKLOAD, busy, idle, 4.2)
    try:
        _fifo(work.pid, 10)
        with SamplerProcess([Target("busy", work.pid, cores=1.0)], out) as sampler:
            _fifo(sampler.pid, 20)
            go_ns = time.monotonic_ns()
            work.stdin.write("go\n")
            work.stdin.flush()
            log = work.stdout.readline().split()
            work.wait(timeout=30)
    finally:
        work.kill()
        work.wait()
    phases = np.array([[int(x) for x in p.split(",")] for p in log])
    return read_raw(out), go_ns, phases


def test_cpu_calibration(tmp_path, host_load):
    busy, idle = 0.150, 0.250
    busy_runs = []
    for attempt in range(ATTEMPTS):
        load = host_load.restart()
        raw, go_ns, phases = _run_cpu(tmp_path / f"cpu{attempt}.npz", busy, idle)
        if phases[:, 2].max() > LATE_NS or raw.meta["n_late"]:
            busy_runs.append(f"workload {phases[:, 2].max() / 1e6:.1f} ms late, "
                             f"{raw.meta['n_late']} samples late ({load})")
            print("disturbed, again:", busy_runs[-1])
            continue
        truth_busy = (phases[:, 1] - phases[:, 0]).mean() / 1e9  # the workload's own wall-clock view
        t0 = (go_ns - raw.start_ns) / 1e9 + 0.1
        t1 = (phases[-1, 1] - raw.start_ns) / 1e9
        m = label_rates(raw.rates("busy"), t0, t1)
        dt = raw.period_s
        print("cpu calibration:", {k: round(v, 4) for k, v in m.items() if k.startswith("compute")},
              "workload busy wall s:", round(truth_busy, 4), "attempt:", attempt + 1, load)
        off = _off({"compute_burst_amount": (m["compute_burst_amount"], 100.0, TOL * 100.0),
                    "compute_burst_duration": (m["compute_burst_duration"], busy, max(TOL * busy, dt)),
                    "compute_idle_duration": (m["compute_idle_duration"], idle, max(TOL * idle, dt)),
                    "compute_share_BIB": (m["compute_share_BIB"], 1.0, 0.1)})
        if _judge(off, load, attempt, busy_runs):
            return
    pytest.skip(f"host too busy in {ATTEMPTS} attempts: " + " | ".join(busy_runs))


def _run_net(out, total, period, rate):
    """One run; returns (raw series, burst start times ns, worst chunk lateness ns)."""
    receiver = _spawn(RECEIVER)
    sender = None
    try:
        _fifo(receiver.pid, 10)
        port = int(receiver.stdout.readline())
        sender = _spawn(SENDER, port, total, period, rate, 3.6)
        _fifo(sender.pid, 10)
        targets = [Target("sender", sender.pid), Target("receiver", receiver.pid)]
        with SamplerProcess(targets, out) as sampler:
            _fifo(sampler.pid, 20)
            time.sleep(0.2)  # a baseline before the first burst
            sender.stdin.write("go\n")
            sender.stdin.flush()
            *starts, worst = (int(x) for x in sender.stdout.readline().split())
            sender.wait(timeout=30)
            assert int(receiver.stdout.readline()) == total * len(starts)
    finally:
        for p in (sender, receiver):
            if p is not None:
                p.kill()
                p.wait()
    return read_raw(out), starts, worst


def test_network_calibration(tmp_path, host_load):
    total, period, rate = 4_000_000, 0.300, 40e6  # 4 MB every 300 ms at 40 MB/s
    burst = total / rate
    busy_runs = []
    for attempt in range(ATTEMPTS):
        load = host_load.restart()
        raw, starts, worst = _run_net(tmp_path / f"net{attempt}.npz", total, period, rate)
        if worst > LATE_NS or raw.meta["n_late"]:
            busy_runs.append(f"sender {worst / 1e6:.1f} ms late, {raw.meta['n_late']} samples late ({load})")
            print("disturbed, again:", busy_runs[-1])
            continue
        dt = raw.period_s
        t0 = (starts[0] - raw.start_ns) / 1e9 + 0.05
        t1 = (starts[-1] - raw.start_ns) / 1e9 + period - 0.05
        figures = {}
        for name, res in (("sender", "tx"), ("receiver", "rx")):
            m = label_rates(raw.rates(name), t0, t1)
            c = raw.counters(name)[f"{res}_bytes"]
            # bytes per period from the cumulative counter over whole periods (first to last start)
            a, b = (starts[0] - raw.start_ns) / 1e9 - 0.05, (starts[-1] - raw.start_ns) / 1e9 - 0.05
            per_period = (c[c.index <= b].iloc[-1] - c[c.index <= a].iloc[-1]) / (len(starts) - 1)
            per_burst = m[f"{res}_burst_amount"] * 1e6 * m[f"{res}_burst_duration"]
            print(f"{res} calibration:", {k: round(v, 4) for k, v in m.items() if k.startswith(res)},
                  "bytes/period:", int(per_period), "amount x duration:", int(per_burst),
                  "attempt:", attempt + 1, load)
            figures.update({
                f"{res}_burst_duration": (m[f"{res}_burst_duration"], burst, max(TOL * burst, dt)),
                f"{res}_idle_duration": (m[f"{res}_idle_duration"], period - burst, max(TOL * (period - burst), dt)),
                f"{res}_burst_amount": (m[f"{res}_burst_amount"], rate / 1e6, TOL * rate / 1e6),
                f"{res}_bytes_per_period": (per_period, total, TOL * total),
                # amount x duration: the duration's tolerance carries over
                f"{res}_amount_x_duration": (per_burst, total, TOL * total + max(TOL * burst, dt) * rate),
            })
        if _judge(_off(figures), load, attempt, busy_runs):
            return
    pytest.skip(f"host too busy in {ATTEMPTS} attempts: " + " | ".join(busy_runs))
