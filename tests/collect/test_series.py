"""Raw counters -> rates, on hand-made sampler files whose rates are computed by hand."""
from __future__ import annotations

import json

import numpy as np
import pytest

from driple.collect.series import FORMAT, RawSeries, _integrate_steps, read_raw
from driple.errors import DripleError

START = 5_000_000_000  # monotonic ns of the first sample


def _meta(device="cpu", cores=2.0, ended_ns=None):
    return {
        "format": FORMAT,
        "period_s": 0.01,
        "device": device,
        "net_mode": "auto",
        "start_ns": START,
        "clock_offset_ns": 1_000_000_000_000,
        "host_mem_bytes": 1_000_000_000,
        "n_samples": 5,
        "n_late": 0,
        "interfaces": ["lo"],
        "targets": [
            {"name": "w0", "pid": 1, "cores": cores, "veth": None, "gpu_index": 0 if device == "gpu" else None,
             "net_source": "tcp_info", "ended_ns": ended_ns}
        ],
    }


def _arrays():
    k = np.arange(5)
    t = START + k * 10_000_000  # every 10 ms
    return {
        "w0/t_ns": t,
        "w0/cpu_ns": 3_000_000_000 + k * 10_000_000,  # 10 ms CPU per 10 ms: 1 of 2 cores -> 50 %
        "w0/rss_bytes": np.array([1, 1, 2, 2, 1]) * 100_000_000,  # 10 % / 20 % of 1 GB
        "w0/tx_bytes": 7 + k * 100_000,  # 100 kB per 10 ms = 10 MB/s
        "w0/rx_bytes": np.array([0, 0, 500_000, 500_000, 500_000]),  # 50 MB/s in one interval
        "w0/n_procs": np.ones(5, dtype=np.int32),
        "iface/t_ns": t,
        "iface/rx_bytes": (k * 200_000)[None, :],
        "iface/tx_bytes": (k * 200_000)[None, :],
    }


def test_cpu_rates_by_hand():
    raw = RawSeries(_meta(), _arrays())
    r = raw.rates("w0")
    assert list(r.columns) == ["compute", "memory", "tx", "rx"]
    assert r.index.tolist() == pytest.approx([0.01, 0.02, 0.03, 0.04])  # end of each interval
    assert r["compute"].tolist() == pytest.approx([50.0] * 4)
    assert r["memory"].tolist() == pytest.approx([10.0, 20.0, 20.0, 10.0])
    assert r["tx"].tolist() == pytest.approx([10.0] * 4)
    assert r["rx"].tolist() == pytest.approx([0.0, 50.0, 0.0, 0.0])
    assert raw.interface_rates()["lo_tx"].tolist() == pytest.approx([20.0] * 4)
    assert raw.names == ["w0"] and raw.ended("w0") is None
    assert RawSeries(_meta(ended_ns=START + 45_000_000), _arrays()).ended("w0") == pytest.approx(0.045)
    with pytest.raises(DripleError, match="no target named"):
        raw.rates("w9")


def test_gpu_rates_average_the_driver_samples():
    a = _arrays()
    offset = _meta()["clock_offset_ns"]
    # driver samples every 20 ms (us, wall clock): value holds over the 20 ms before each stamp
    stamps_ns = START + np.array([0, 20, 40]) * 1_000_000
    a["gpu0/gpu_t_us"] = (stamps_ns + offset) // 1000
    a["gpu0/gpu_util"] = np.array([0.0, 100.0, 40.0])
    a["gpu0/memory_t_us"] = a["gpu0/gpu_t_us"]
    a["gpu0/memory_util"] = np.array([10.0, 10.0, 10.0])
    r = RawSeries(_meta("gpu"), a).rates("w0")
    # (0,10] and (10,20] ms lie under the sample stamped 20 -> 100; (20,30], (30,40] -> 40
    assert r["compute"].tolist() == pytest.approx([100.0, 100.0, 40.0, 40.0])
    assert r["memory"].tolist() == pytest.approx([10.0] * 4)


def test_step_integration_outside_is_nan():
    t = np.array([100, 200, 300])
    v = np.array([1.0, 2.0, 3.0])
    out = _integrate_steps(t, v, np.array([-10, 50, 150, 300, 400]))
    # the first sample covers one median gap before it: knots 0,100,200,300, integral 0,100,300,600
    assert np.isnan(out[0]) and np.isnan(out[4])
    assert out[1:4].tolist() == pytest.approx([50.0, 200.0, 600.0])


def test_read_raw_errors(tmp_path):
    with pytest.raises(DripleError, match="no sampler output"):
        read_raw(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(DripleError, match="not a readable"):
        read_raw(bad)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(DripleError, match="not a driple"):
        read_raw(other)
    old = tmp_path / "old.npz"
    np.savez(old, meta=np.array(json.dumps({**_meta(), "format": "driple-raw-0"})))
    with pytest.raises(DripleError, match="format"):
        read_raw(old)


def test_round_trip(tmp_path):
    a = _arrays()
    path = tmp_path / "rt.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(_meta())), **a)
    raw = read_raw(path)
    assert raw.rates("w0")["tx"].tolist() == pytest.approx([10.0] * 4)
    assert raw.counters("w0")["cpu_ns"].iloc[0] == 3_000_000_000
