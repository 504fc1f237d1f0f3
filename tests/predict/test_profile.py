"""ResourceProfile on hand-made profiles whose derived numbers are worked out in the comments."""
from __future__ import annotations

import json

import numpy as np
import pytest

from driple.errors import DripleError
from driple.metrics import METRICS, RESOURCES, target_names, use_labels
from driple.predict.profile import ResourceProfile, ResourceShape, plot_profile


def make(setting="cpu-ddp-w2-lo", model="toy A", **kw):
    # compute: 90% for 0.3 s, idle 0.1 s -> period 0.4 s, duty 0.75, mean 67.5
    # memory:  4 (MB; % in labels v1) for 1.0 s, idle 1.0 s  -> duty 0.5; a level held -> mean 4
    # tx:      400 MB/s for 20 ms, idle 80 ms -> period 0.1 s, duty 0.2, mean 80
    # rx:      300 MB/s for 50 ms, idle 150 ms -> duty 0.25, mean 75
    m = {
        "compute_burst_amount": 90.0, "compute_burst_duration": 0.3, "compute_idle_duration": 0.1,
        "memory_burst_amount": 4.0, "memory_burst_duration": 1.0, "memory_idle_duration": 1.0,
        "tx_burst_amount": 400.0, "tx_burst_duration": 0.02, "tx_idle_duration": 0.08,
        "rx_burst_amount": 300.0, "rx_burst_duration": 0.05, "rx_idle_duration": 0.15,
    }
    if "step_time" in target_names():  # labels v2: a step of 0.4 s (the compute period)
        m["step_time"] = 0.4
    m.update(kw.pop("metrics", {}))
    return ResourceProfile(setting, model, m, **kw)


def test_duty_period_mean_by_hand():
    p = make()
    assert [p.duty_cycle(r) for r in RESOURCES] == pytest.approx([0.75, 0.5, 0.2, 0.25])
    assert [p.period_s(r) for r in RESOURCES] == pytest.approx([0.4, 2.0, 0.1, 0.2])
    assert [p.mean_load(r) for r in RESOURCES] == pytest.approx([67.5, 4.0, 80.0, 75.0])
    assert list(p.metrics) == list(target_names())


def test_memory_is_a_level_on_every_host_in_labels_v2():
    # labels v2: memory's amount is the peak allocated MB, held between bursts on GPUs too
    p = make(setting="gpu-ddp-w4-10g")
    assert p.device == "gpu" and p.idle_level("memory") == 4.0 and p.mean_load("memory") == pytest.approx(4.0)


def test_memory_level_on_gpu_host_is_on_off_in_labels_v1():
    # labels v1: GPU memory (controller busy %) drops to 0 between bursts: mean = 4 x 0.5
    use_labels("v1")
    p = make(setting="gpu-ddp-w4-10g")
    assert p.device == "gpu"
    assert p.idle_level("memory") == 0.0
    assert p.mean_load("memory") == pytest.approx(2.0)


def test_idle_level_override():
    # compute idling at 40% of a core: 40 + (90 - 40) x 0.75 = 77.5
    p = make(idle_levels={"compute": 40.0, "memory": 2.0})
    assert p.mean_load("compute") == pytest.approx(77.5)
    assert p.mean_load("memory") == pytest.approx(2.0 + 2.0 * 0.5)
    assert p.mean_load("tx") == pytest.approx(80.0)


def test_negative_and_zero_durations():
    # a negative predicted idle duration reads as 0: always in burst
    p = make(metrics={"tx_idle_duration": -0.01, "rx_burst_duration": 0.0, "rx_idle_duration": 0.0})
    assert p.duty_cycle("tx") == 1.0 and p.mean_load("tx") == pytest.approx(400.0)
    assert p.duty_cycle("rx") == 1.0 and p.period_s("rx") == 0.0
    idle = make(metrics={"tx_burst_duration": 0.0, "tx_idle_duration": 2.0})
    assert idle.duty_cycle("tx") == 0.0 and idle.mean_load("tx") == 0.0


def test_validation_errors():
    with pytest.raises(DripleError, match="missing"):
        ResourceProfile("cpu-ddp-w2-lo", "x", {"tx_burst_amount": 1.0})
    with pytest.raises(DripleError, match="finite"):
        make(metrics={"tx_burst_amount": float("nan")})
    with pytest.raises(DripleError, match="low"):
        make(intervals={"tx_burst_amount": (5.0, 1.0)})
    with pytest.raises(DripleError, match="unknown metric"):
        make(intervals={"tx_amount": (1.0, 5.0)})
    with pytest.raises(DripleError, match="nominal_coverage"):
        make(nominal_coverage=90)
    with pytest.raises(DripleError, match="unknown resource"):
        make().duty_cycle("disk")


def test_from_array_keeps_metrics_order():
    n = len(target_names())  # 13 in labels v2: the 12 metrics, then the step time
    p = ResourceProfile.from_array("cpu-ddp-w2-lo", "x", np.arange(float(n)))
    assert p.metrics["compute_burst_amount"] == 0.0 and p.metrics["rx_idle_duration"] == 11.0
    assert list(p.metrics) == list(target_names())
    with pytest.raises(DripleError, match=str(n)):
        ResourceProfile.from_array("cpu-ddp-w2-lo", "x", np.arange(n - 1.0))


def test_timeseries_levels_period_and_phase():
    p = make()
    t, s = p.timeseries(1.0, hz=100)
    assert len(t) == 100 and t[1] == pytest.approx(0.01)
    assert set(s) == set(RESOURCES)
    # tx: 400 for 2 samples of every 10 (t = 0, 0.01, 0.10, 0.11, ...), else 0
    expect = np.tile([400.0, 400.0] + [0.0] * 8, 10)
    assert np.array_equal(s["tx"], expect)
    assert s["tx"].mean() == pytest.approx(p.mean_load("tx"))
    # compute: 30 samples at 90, then 10 at 0, repeated (period 40 samples)
    assert np.array_equal(s["compute"][:40], np.r_[np.full(30, 90.0), np.zeros(10)])
    assert np.array_equal(s["compute"][40:80], s["compute"][:40])
    # memory on a CPU host is flat at its level
    assert np.all(s["memory"] == 4.0)
    # a phase of 50 ms moves the tx bursts to samples 5, 6 of each period; a dict sets one resource
    _, sp = p.timeseries(1.0, hz=100, phase={"tx": 0.05})
    assert np.flatnonzero(sp["tx"][:10]).tolist() == [5, 6]
    assert np.array_equal(sp["rx"], s["rx"])
    _, sa = p.timeseries(1.0, hz=100, phase=0.05)
    assert np.flatnonzero(sa["rx"][:20]).tolist() == [5, 6, 7, 8, 9]


def test_timeseries_boundaries_land_on_cycle_start():
    # t = k x period must start a burst even where np.mod rounds to period - 1 ulp (e.g. 0.3 mod 0.1)
    s = ResourceShape(burst_amount=1.0, burst_duration_s=0.01, idle_duration_s=0.09)
    t = np.arange(1000) / 100
    assert s.level(t).sum() == 100


def test_to_dict_schema_and_round_trip():
    p = make(intervals={"tx_burst_amount": (350.0, 450.0)}, nominal_coverage=0.9)
    d = json.loads(json.dumps(p.to_dict()))  # JSON-able
    assert set(d) == {"schema", "setting", "model", "metrics", "units", "intervals", "nominal_coverage", "calibration",
                      "idle_levels", "resident", "notes", "resources", "batch_size", "workers", "throughput", "hardware", "memory", "flags"}
    assert d["schema"] == "driple-profile/2" and d["throughput"] is None  # no batch size: no throughput
    assert list(d["metrics"]) == list(target_names())
    assert d["units"]["tx_burst_amount"] == "MB/s" and d["units"]["tx_idle_duration"] == "s"
    assert d["intervals"] == {"tx_burst_amount": [350.0, 450.0]}
    assert set(d["resources"]) == set(RESOURCES)
    assert set(d["resources"]["tx"]) == {"duty_cycle", "period_s", "mean_load", "burst_amount",
                                         "burst_duration_s", "idle_duration_s", "idle_level"}
    assert d["resources"]["tx"]["duty_cycle"] == pytest.approx(0.2)
    assert d["resources"]["compute"]["mean_load"] == pytest.approx(67.5)
    back = ResourceProfile.from_dict(d)
    assert back == p
    assert back.intervals["tx_burst_amount"] == (350.0, 450.0)
    plain = make()
    assert plain.to_dict()["intervals"] is None and ResourceProfile.from_dict(plain.to_dict()) == plain
    with pytest.raises(DripleError, match="schema"):
        ResourceProfile.from_dict({**d, "schema": "other/9"})
    old = {k: v for k, v in d.items() if k not in ("batch_size", "workers", "throughput")}
    assert ResourceProfile.from_dict({**old, "schema": "driple-profile/1"}) == p  # still read


def test_describe_says_the_numbers():
    lines = make().describe().splitlines()
    assert len(lines) == 5
    assert lines[0] == ("compute busy 75% of the time in 300 ms bursts at 90% of a core, "
                        "idle 100 ms between; mean 67.5% of a core")
    assert lines[1] == "memory holds up to 4 MB (peak allocated; peak level 50% of the time, cycle 2.00 s)"
    assert lines[2] == ("network TX busy 20% of the time in 20 ms bursts at 400 MB/s, "
                        "idle 80 ms between; mean 80 MB/s")
    assert "25%" in lines[3] and "50 ms" in lines[3] and "300 MB/s" in lines[3]
    assert lines[4] == "step time 0.4 s"
    gpu = make(setting="gpu-ddp-w4-10g").describe().splitlines()
    assert "90% GPU utilisation" in gpu[0] and gpu[1].startswith("memory holds up to 4 MB (peak allocated")
    use_labels("v1")  # labels v1: memory in % of host memory (RSS), on/off on GPUs; no step time
    lines = make().describe().splitlines()
    assert len(lines) == 4 and lines[1].startswith("memory holds up to 4% of host memory")
    assert "memory busy 50% of the time" in make(setting="gpu-ddp-w4-10g").describe().splitlines()[1]


def test_summary_one_sentence():
    s = make().summary()
    assert s.endswith(".") and ". " not in s and "\n" not in s  # one sentence
    for part in ("toy A", "cpu-ddp-w2-lo", "67.5% of a core", "TX 80 MB/s", "RX 75 MB/s",
                 "bursts at 400 MB/s for 20 ms every 100 ms"):
        assert part in s


def test_plot_profile_writes_png(tmp_path):
    out = plot_profile(make(intervals={"tx_burst_amount": (350.0, 450.0)}, nominal_coverage=0.9),
                       tmp_path / "p.png", seconds=1.0)
    assert out.exists() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
