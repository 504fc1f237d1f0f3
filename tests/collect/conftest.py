"""Fixtures of the collector tests, and the tiny workloads their real jobs train (the shared
real DDP job ``ddp_job`` is in ``tests/conftest.py``).

The workloads are user code in the sense of ``module:function``: a job names them as
``<this file>:tiny_mlp``. ``crash_at`` / ``hang_at`` make one rank fail at that forward call,
so the launcher's failure handling is tested on real processes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
TINY = f"{HERE}:tiny_mlp"


def tiny_mlp(width: int = 512, depth: int = 2, in_features: int = 64, classes: int = 10,
             batch_size: int = 16, crash_at: int | None = None, hang_at: int | None = None,
             fail_rank: int = 1):
    """An MLP workload; parameter bytes ~ 4 * (in*width + (depth-1)*width^2 + width*classes)."""
    import torch
    from torch import nn

    class FaultyMLP(nn.Sequential):
        calls = 0

        def forward(self, x):
            FaultyMLP.calls += 1
            mine = int(os.environ.get("RANK", "0")) == fail_rank
            if mine and crash_at is not None and FaultyMLP.calls >= crash_at:
                raise RuntimeError(f"injected crash at forward call {FaultyMLP.calls}")
            if mine and hang_at is not None and FaultyMLP.calls >= hang_at:
                while True:  # a worker stuck without ever returning
                    time.sleep(1)
            return super().forward(x)

    layers = [nn.Linear(in_features, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, classes))
    model = FaultyMLP(*layers)

    class Workload:
        name = "tiny_mlp"
        family = "mlp"
        config = {"width": width, "depth": depth}

        def __init__(self):
            self.model = model

        def make_batch(self, batch_size=None, generator=None, device="cpu"):
            bs = batch_size or 16
            x = torch.randn(bs, in_features, generator=generator).to(device)
            y = torch.randint(0, classes, (bs,), generator=generator).to(device)
            return x, y

        @staticmethod
        def loss_fn(out, targets):
            return nn.functional.cross_entropy(out, targets)

    return Workload()


def tiny_module(width: int = 32):
    """A plain nn.Module with ``input_shape`` (the launcher supplies data and loss)."""
    from torch import nn

    m = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 4))
    m.input_shape = (8,)
    return m


def driple_leftovers() -> dict:
    """driple namespaces and links alive on this machine that this test run owns: made by this
    process or one of its children, or by a process that is gone (a leftover). Those of another
    live process (another test run on a shared host) are its business."""
    import psutil

    from driple.collect.netns import _OWNED

    ours = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}

    def owned(name: str) -> bool:
        m = _OWNED.match(name)
        if not m:
            return True  # driple-named but not a cluster's: report it
        pid = int(m.group(1), 36)
        return pid in ours or not psutil.pid_exists(pid)

    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "netns": [n for n in (l.split()[0] for l in ns.splitlines() if l.startswith("driple-")) if owned(n)],
        "links": [n for n in (l.split(":")[1].strip().split("@")[0] for l in links.splitlines())
                  if n.startswith("driple-") and owned(n)],
    }


def worker_pids(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker`` (a job's work dir)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and int(d.name) != os.getpid():
            pids.append(int(d.name))
    return pids


# -- host load: what can make a timing test wrong without the code under test being wrong --------
BUSY_CORES = 0.25  # other processes using more than a quarter of a core on average: a busy host


def _host_busy_s() -> float:
    """CPU seconds the whole host spent busy (all cores; /proc/stat), steal time included."""
    import psutil

    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)


def _own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class HostLoad:
    """How busy the rest of the host was since :meth:`restart`.

    ``other_cores`` is the CPU (in cores, 0 .. cpu count) used by processes other than this
    one and its waited-for children, from /proc/stat and ``os.times()``; with the 1-minute load
    average it is what a timing test reports when it retries or skips on a busy host. Read it
    after the test's own children have been waited for (or they count as "other").
    """

    def __init__(self):
        self.restart()

    def restart(self) -> "HostLoad":
        self._t, self._host, self._own = time.monotonic(), _host_busy_s(), _own_cpu_s()
        return self

    @property
    def other_cores(self) -> float:
        dt = time.monotonic() - self._t
        other = (_host_busy_s() - self._host) - (_own_cpu_s() - self._own)
        return max(0.0, other) / dt if dt > 0 else 0.0

    @property
    def busy(self) -> bool:
        return self.other_cores > BUSY_CORES

    def __str__(self) -> str:
        return (f"other processes used {self.other_cores:.2f} of {os.cpu_count()} cores, "
                f"load average {os.getloadavg()[0]:.2f}")

    def check(self, ok: bool, what: str) -> None:
        """Pass if ``ok``; else skip with the measured load if the host was busy, fail if quiet."""
        if ok:
            return
        if self.busy:
            pytest.skip(f"host busy ({self}): {what}")
        pytest.fail(f"{what} on a quiet host ({self})")


@pytest.fixture
def host_load() -> HostLoad:
    """A :class:`HostLoad` measuring from the start of the test."""
    return HostLoad()


def check_sample_grid(raw, name: str, load: HostLoad, at_least_s: float = 0.0,
                      at_most_s: float | None = None) -> None:
    """What a fixed-period sampler promises whatever the load, then that it kept the period.

    Samples sit on a grid of one period from the first: a late one skips the grid points it
    missed (each such skip counted in ``n_late``), so the samples of a target sampled from
    start to end are the grid points over its span minus at least one per late sample, and
    with none late exactly the grid points. The span covers what the test waited inside the
    sampler block (``at_least_s``, less one period: the stop falls between two samples) and no
    more than the block lasted (``at_most_s``). On a busy host a sampler may fall late: more
    than 5 % of samples late, or the last ones missed before the stop, skips with the load.
    """
    import numpy as np

    period = raw.period_s
    t = raw.arrays[f"{name}/t_ns"]
    span = (t[-1] - t[0]) / 1e9
    # grid points over the span, to the nearest: a timestamp may be read a little late (less
    # than a period, not counted in n_late); the first 0.3 ms late made 51 samples span 49.98
    # periods on a loaded host, which a floor counted as a sampler ahead of its grid
    points = int(np.floor(span / period + 0.5)) + 1
    late = raw.meta["n_late"]
    assert np.all(np.diff(t) > 0)
    if at_most_s is not None:
        assert span <= at_most_s + period, (span, at_most_s)
    assert len(t) <= points - late, (len(t), points, late)  # never faster than the grid
    if late == 0:
        assert len(t) == points, (len(t), points)
    load.check(late <= 0.05 * len(t), f"{late} of {len(t)} samples more than one period late")
    load.check(span >= at_least_s - period, f"samples over {span:.3f} s of the {at_least_s} s waited")


@pytest.fixture
def sample_grid():
    """:func:`check_sample_grid`."""
    return check_sample_grid


@pytest.fixture
def tiny_model() -> str:
    """``<conftest.py>:tiny_mlp``: the user-code workload of the real-job tests."""
    return TINY


@pytest.fixture
def leftovers():
    """Function listing driple namespaces and links alive now."""
    return driple_leftovers


@pytest.fixture
def pids_of():
    """Function listing live processes whose command line contains a marker."""
    return worker_pids


def paced(busy_ms=(15.0, 20.0), batch_size: int = 4):
    """A workload whose forward keeps rank r's thread busy for ``busy_ms[r]`` ms (wall clock).

    In a 2-rank DDP job the faster rank then waits for the slower one at every gradient
    all-reduce: rank 0 computes 15 ms more than the framework's own work and waits ~5 ms per
    iteration (the timeline calibration). The busy span is on the wall clock, as the timeline
    is: a preempted busy loop still spans its 15 ms.
    """
    import torch
    from torch import nn

    busy_s = float(busy_ms[int(os.environ.get("RANK", "0")) % len(busy_ms)]) / 1e3

    class Paced(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            stop = time.monotonic() + busy_s
            while time.monotonic() < stop:
                pass
            return self.fc(x)

    class Workload:
        name = "paced"
        family = "calibration"
        config = {"busy_ms": list(busy_ms)}

        def __init__(self):
            self.model = Paced()

        def make_batch(self, batch_size=None, generator=None, device="cpu"):
            bs = batch_size or 4
            return torch.randn(bs, 4, generator=generator).to(device), torch.randint(0, 2, (bs,), generator=generator).to(device)

        @staticmethod
        def loss_fn(out, targets):
            return nn.functional.cross_entropy(out, targets)

    return Workload()


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def terminal_preexec():
    """``preexec_fn`` for a child that is to get Ctrl-C as in a terminal. A shell runs a
    background job (``cmd &``, e.g. a CI script started that way) with SIGINT *ignored*, its
    children inherit that, and Python then installs no KeyboardInterrupt handler: a test of
    Ctrl-C would test the harness, not driple."""
    return _sigint_as_in_a_terminal
