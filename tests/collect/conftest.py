"""Fixtures of the collector tests, and the tiny workloads their real jobs train (the shared
real DDP job ``ddp_job`` is in ``tests/conftest.py``).

The workloads are user code in the sense of ``module:function``: a job names them as
``<this file>:tiny_mlp``. ``crash_at`` / ``hang_at`` make one rank fail at that forward call,
so the launcher's failure handling is tested on real processes.
"""
from __future__ import annotations

import os
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
    """driple processes, namespaces and links alive on this machine (started by this test run)."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "netns": [l.split()[0] for l in ns.splitlines() if l.startswith("driple-")],
        "links": [l.split(":")[1].strip().split("@")[0] for l in links.splitlines()
                  if l.split(":")[1].strip().startswith("driple-")],
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
    """A workload whose forward keeps rank r's thread busy for ``busy_ms[r]`` ms of CPU time.

    In a 2-rank DDP job the faster rank then waits for the slower one at every gradient
    all-reduce: rank 0 computes ~15 ms and waits ~5 ms per iteration (the timeline calibration).
    Busy time is counted on the thread's CPU clock, so preemption cannot shorten a burst.
    """
    import torch
    from torch import nn

    busy_s = float(busy_ms[int(os.environ.get("RANK", "0")) % len(busy_ms)]) / 1e3

    class Paced(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            stop = time.thread_time() + busy_s
            while time.thread_time() < stop:
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
