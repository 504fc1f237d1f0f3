"""GPU sampling against a fake ``pynvml`` (no GPU here): the real code path, faked driver.

The fake's GPU follows a 400 ms cycle: 150 ms busy (utilization.gpu 90 %, utilization.memory
60 %) and 250 ms idle (5 %, 10 %); the driver averages over 17 ms samples with wall-clock
timestamps in us and keeps the last 2 s, as NVML does (with longer sample periods).
"""
from __future__ import annotations

import os
import sys
import time
import types

import pytest

from driple.collect.labels.kmeans import label_rates
from driple.collect.sampling import SamplerProcess, Target, read_raw
from driple.collect.sampling import nvml
from driple.collect.sampling.sampler import Sampler

FAKE_PYNVML = '''
"""Fake pynvml for driple's tests: one GPU with a 400 ms busy/idle cycle."""
import time
from types import SimpleNamespace

NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_MEMORY_UTILIZATION_SAMPLES = 2
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_ERROR_NOT_FOUND = 6
PERIOD_US = 17_000  # not a divisor of the cycle: the phase drifts, as on a real GPU
CYCLE_US, BUSY_US = 400_000, 150_000
LEVELS = {1: (90.0, 5.0), 2: (60.0, 10.0)}
MEMORY_USED = 4_000_000_000


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(index):
    if index != 0:
        raise NVMLError(2)
    return ("fake-gpu", index)


def _busy_us(t):  # busy time in (0, t]
    return (t // CYCLE_US) * BUSY_US + min(t % CYCLE_US, BUSY_US)


def nvmlDeviceGetSamples(handle, sampling_type, last_seen_us):
    now = time.time_ns() // 1000
    end = now - now % PERIOD_US
    start = max(last_seen_us, end - 100 * PERIOD_US)
    busy, idle = LEVELS[sampling_type]
    out = []
    for ts in range(start - start % PERIOD_US + PERIOD_US, end + 1, PERIOD_US):
        f = (_busy_us(ts) - _busy_us(ts - PERIOD_US)) / PERIOD_US
        value = SimpleNamespace(uiVal=int(round(f * busy + (1 - f) * idle)))
        out.append(SimpleNamespace(timeStamp=ts, sampleValue=value))
    if not out:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return NVML_VALUE_TYPE_UNSIGNED_INT, out


def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(total=16_000_000_000, used=MEMORY_USED, free=16_000_000_000 - MEMORY_USED)
'''


NVML_PERIOD_S = 0.017  # the fake driver's sample period (PERIOD_US)


@pytest.fixture
def fake_pynvml(monkeypatch, tmp_path):
    """The fake, both imported here and importable by a sampler process (via PYTHONPATH)."""
    (tmp_path / "fakenvml").mkdir()
    (tmp_path / "fakenvml" / "pynvml.py").write_text(FAKE_PYNVML)
    module = types.ModuleType("pynvml")
    exec(compile(FAKE_PYNVML, "pynvml.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fakenvml") + (os.pathsep + path if path else ""))
    return module


def _check_gpu_metrics(raw, name):
    counters = raw.counters(name)
    assert (counters["gpu_mem_used_bytes"] == 4_000_000_000).all()
    assert raw.gpu_samples(name, "gpu").between(5, 90).all()
    rates = raw.rates(name)
    assert list(rates.columns) == ["compute", "memory", "tx", "rx"]
    m = label_rates(rates, 0.3, rates.index[-1] - 0.1)
    # durations are counted in the driver's 17 ms samples: 10 %, and never less than one sample
    one = NVML_PERIOD_S
    assert m["compute_burst_amount"] == pytest.approx(90.0, rel=0.05)
    assert m["compute_burst_duration"] == pytest.approx(0.150, abs=max(0.015, one))
    assert m["compute_idle_duration"] == pytest.approx(0.250, abs=max(0.025, one))
    assert m["memory_burst_amount"] == pytest.approx(60.0, rel=0.05)
    assert m["memory_burst_duration"] == pytest.approx(0.150, abs=max(0.015, one))


def test_gpu_wrapper(fake_pynvml):
    pynvml = nvml.load()
    gpu = nvml.Gpu(pynvml, 0)
    first = gpu.new_samples("gpu")
    assert len(first) == 100 and all(5 <= v <= 90 for _, v in first)
    again = gpu.new_samples("gpu")  # only newer samples, or none (NVML_ERROR_NOT_FOUND)
    assert all(ts > first[-1][0] for ts, _ in again)
    assert gpu.memory_used() == 4_000_000_000
    with pytest.raises(Exception, match="GPU index 3"):
        nvml.Gpu(pynvml, 3)


def test_gpu_sampler_in_process(fake_pynvml, tmp_path):
    sampler = Sampler([Target("g0", os.getpid(), gpu_index=0)], period_s=0.01, device="gpu")
    deadline = time.monotonic() + 2.6

    def wait(timeout):
        time.sleep(timeout)
        return time.monotonic() > deadline

    try:
        sampler.run(wait)
        path = sampler.save(tmp_path / "gpu.npz")
    finally:
        sampler.close()
    raw = read_raw(path)
    assert raw.meta["device"] == "gpu"
    _check_gpu_metrics(raw, "g0")


def test_gpu_sampler_process(fake_pynvml, tmp_path):
    out = tmp_path / "gpu_proc.npz"
    with SamplerProcess([Target("g0", os.getpid(), gpu_index=0)], out, device="gpu"):
        time.sleep(2.6)
    _check_gpu_metrics(read_raw(out), "g0")
