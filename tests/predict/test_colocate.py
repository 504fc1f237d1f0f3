"""Co-location arithmetic on hand-made profiles; every expected number is worked out in a comment."""
from __future__ import annotations

import json

import pytest

from driple.collect.corun import measured_combined
from driple.errors import DripleError
from driple.metrics import RESOURCES, target_names
from driple.predict.colocate import (
    colocate,
    host_capacity,
    overload_probability,
    rank_pairs,
    slot_capacity,
)
from driple.predict.profile import ResourceProfile


def prof(model, compute, memory, tx, rx, setting="cpu-ddp-w2-lo", step_time=1.0):
    """Each resource as (burst amount, burst duration s, idle duration s); memory's amount in the
    declared unit (labels v2: MB), and the job-level step time (s) where it is declared."""
    m = {}
    for r, (a, b, i) in zip(RESOURCES, (compute, memory, tx, rx)):
        m.update({f"{r}_burst_amount": a, f"{r}_burst_duration": b, f"{r}_idle_duration": i})
    if "step_time" in target_names():
        m["step_time"] = step_time
    return ResourceProfile(setting, model, m)


# A: compute duty 0.75 mean 67.5 | memory level 4 | tx 400 duty 0.2 mean 80 | rx 300 duty 0.25 mean 75
A = prof("A", (90, 0.3, 0.1), (4, 1, 1), (400, 0.02, 0.08), (300, 0.05, 0.15))
# B: compute 60 duty 0.5 mean 30 | memory level 10 | tx 500 duty 0.5 mean 250 | rx never bursts
B = prof("B", (60, 0.1, 0.1), (10, 0.5, 0.5), (500, 0.05, 0.05), (100, 0.0, 0.2))
# C: compute 20 duty 0.5 mean 10 | memory 1 | tx, rx 50 duty 0.1 mean 5
C = prof("C", (20, 0.1, 0.1), (1, 1, 1), (50, 0.01, 0.09), (50, 0.01, 0.09))
# compute 200 %, memory 100 (in the declared unit: % in labels v1, MB in v2), tx = rx = 600 MB/s
CAP = host_capacity(cores=2, link_mb_s=600, memory_pct=100, memory_mb=100)


def test_host_capacity():
    assert CAP == {"compute": 200.0, "memory": 100.0, "tx": 600.0, "rx": 600.0}
    assert host_capacity(cores=1, memory_mb=100) == {"compute": 100.0, "memory": 100.0}


def test_overload_probability_by_hand():
    # three bursts of 100: capacity 250 is exceeded only when all three burst: 0.2*0.5*0.75
    assert overload_probability([100, 100, 100], [0.2, 0.5, 0.75], 250) == pytest.approx(0.075)
    # capacity 150: any two -> the collision probability 0.475
    assert overload_probability([100, 100, 100], [0.2, 0.5, 0.75], 150) == pytest.approx(0.475)
    # exactly at capacity is not an overload
    assert overload_probability([100, 100], [0.5, 0.5], 200) == 0.0
    # idle levels count: 60 + 60 idle, 100 + 100 burst; capacity 150 -> overloaded unless both idle
    assert overload_probability([100, 100], [0.5, 0.5], 150, idle_levels=[60, 60]) == pytest.approx(0.75)


def test_colocate_two_jobs_by_hand():
    rep = colocate([A, B], CAP)
    assert rep.jobs == ["A", "B"]
    c, m, tx, rx = (rep.resources[r] for r in RESOURCES)
    # compute: 67.5 + 30; bursts collide 0.75 x 0.5; 90 + 60 = 150 <= 200 never overloads
    assert c.combined_mean == pytest.approx(97.5) and c.utilisation == pytest.approx(97.5 / 200)
    assert c.collision_probability == pytest.approx(0.375)
    assert c.overload_probability == 0.0 and c.peak_demand == pytest.approx(150)
    # a demand equal to the capacity is not an overload; one below it is, when both burst
    assert colocate([A, B], {"compute": 150}).resources["compute"].overload_probability == 0.0
    assert colocate([A, B], {"compute": 149}).resources["compute"].overload_probability == pytest.approx(0.375)
    # memory is a level on CPU hosts: 4 + 10 all the time
    assert m.combined_mean == pytest.approx(14.0) and m.overload_probability == 0.0
    # tx: 80 + 250 = 330; collide 0.2 x 0.5 = 0.1; 900 > 600 only then; excess 0.1 x 300 = 30
    assert tx.combined_mean == pytest.approx(330.0)
    assert tx.collision_probability == pytest.approx(0.1)
    assert tx.overload_probability == pytest.approx(0.1)
    assert tx.expected_excess == pytest.approx(30.0)
    assert tx.duty_cycles == pytest.approx({"A": 0.2, "B": 0.5})
    # rx: B never bursts
    assert rx.collision_probability == 0.0 and rx.combined_mean == pytest.approx(75.0)
    # tx is overloaded 10% > 5% of the time: contends
    assert rep.verdict == "contends" and rep.worst_resource == "tx"
    assert "tx" in rep.reason and "10%" in rep.reason
    assert colocate([A, B], CAP, max_overload=0.1).verdict == "packs well"


def test_resident_memory_is_held_by_every_job():
    """A profile's resident amounts (the runtime's part of the resident set) add to both levels."""
    from dataclasses import replace

    a, b = replace(A, resident={"memory": 30.0}), replace(B, resident={"memory": 50.0})
    m = colocate([a, b], CAP).resources["memory"]
    # levels 4 + 30 and 10 + 50: 94 all the time, under 100
    assert m.combined_mean == pytest.approx(94.0) and m.peak_demand == pytest.approx(94.0)
    assert m.overload_probability == 0.0
    # with 100 more held by a third job (C: level 1 + 100) the host's 100 MB never suffice
    m = colocate([a, b, replace(C, resident={"memory": 100.0})], CAP).resources["memory"]
    assert m.combined_mean == pytest.approx(195.0) and m.overload_probability == pytest.approx(1.0)
    assert colocate([A, B], CAP).resources["memory"].combined_mean == pytest.approx(14.0)  # none held
    assert ResourceProfile.from_dict(json.loads(json.dumps(a.to_dict()))).resident == {"memory": 30.0}
    assert "(+30 MB held by the runtime)" in a.summary() or "(+30% held by the runtime)" in a.summary()
    with pytest.raises(DripleError, match="unknown resource"):
        replace(A, resident={"disk": 1.0})


def test_colocate_three_jobs_and_json():
    rep = colocate({"a": A, "b": B, "c": C}, CAP)
    # tx duties 0.2, 0.5, 0.1: none 0.8*0.5*0.9 = 0.36; one 0.2*0.5*0.9 + 0.5*0.8*0.9 + 0.1*0.8*0.5
    # = 0.09 + 0.36 + 0.04 = 0.49 -> collision 0.15
    assert rep.resources["tx"].collision_probability == pytest.approx(0.15)
    # over 600: A+B (900), A+B+C (950), B+C is 550, A+C 450 -> 0.2*0.5 = 0.1
    assert rep.resources["tx"].overload_probability == pytest.approx(0.1)
    assert rep.resources["compute"].combined_mean == pytest.approx(107.5)
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["verdict"] == "contends" and d["worst_overload"] == pytest.approx(0.1)
    assert set(d["resources"]) == set(RESOURCES)
    assert d["resources"]["tx"]["capacity"] == 600.0


def test_does_not_fit_when_mean_exceeds_capacity():
    busy = prof("busy", (100, 1.0, 0.0), (1, 1, 1), (0, 0, 1), (0, 0, 1))  # a full core, always
    rep = colocate([busy, busy], {"compute": 150})
    assert rep.jobs == ["busy", "busy #2"]
    assert rep.resources["compute"].utilisation == pytest.approx(200 / 150)
    assert rep.verdict == "does not fit" and "compute" in rep.reason
    assert rep.resources["tx"].overload_probability is None  # no tx capacity given


def test_rank_pairs_order_and_reasons():
    ranked = rank_pairs([A, B, C], CAP)
    # A+C and B+C never overload; A+C's worst mean is compute 77.5/200 = 0.3875, B+C's tx 255/600
    # = 0.425; A+B contends on tx
    assert [p.jobs for p in ranked] == [("A", "C"), ("B", "C"), ("A", "B")]
    assert [p.verdict for p in ranked] == ["packs well", "packs well", "contends"]
    assert ranked[0].worst_utilisation == pytest.approx(0.3875)
    assert ranked[1].worst_utilisation == pytest.approx(0.425)
    assert "39%" in ranked[0].reason and "packs well" not in ranked[0].reason  # the verdict once
    assert json.loads(json.dumps(ranked[2].to_dict()))["report"]["verdict"] == "contends"


def test_input_errors():
    with pytest.raises(DripleError, match="at least 2"):
        colocate([A], CAP)
    with pytest.raises(DripleError, match="unknown resource"):
        colocate([A, B], {"disk": 1})
    with pytest.raises(DripleError, match="positive"):
        colocate([A, B], {"tx": 0})
    gpu = prof("G", (90, 0.3, 0.1), (4, 1, 1), (400, 0.02, 0.08), (300, 0.05, 0.15), setting="gpu-ddp-w4-10g")
    with pytest.raises(DripleError, match="mix devices"):
        colocate([A, gpu], CAP)


def test_prediction_matches_measurement_over_all_phase_pairs():
    # periods of 10 and 13 samples are coprime: over 130 samples every pair of phases occurs once,
    # so the measured collision of the expected series is exactly d1 x d2 = 0.3 x 5/13
    p = prof("p", (1, 1, 1), (1, 1, 1), (400, 0.03, 0.07), (0, 0, 1))
    q = prof("q", (1, 1, 1), (1, 1, 1), (500, 0.05, 0.08), (0, 0, 1))
    series = {}
    for name, pr in (("p", p), ("q", q)):
        t, s = pr.timeseries(13.01, hz=100)  # 1301 samples -> a 1300-sample grid, 10 full cycles
        series[name] = {"tx": (t, s["tx"])}
    meas = measured_combined(series, capacity={"tx": 600}, thresholds={"p": {"tx": 1.0}, "q": {"tx": 1.0}})
    pred = colocate([p, q], {"tx": 600})
    assert meas.n_samples == 1300
    assert pred.resources["tx"].collision_probability == pytest.approx(0.3 * 5 / 13)
    assert meas.resources["tx"].collision_fraction == pytest.approx(0.3 * 5 / 13)
    assert meas.resources["tx"].overload_fraction == pytest.approx(pred.resources["tx"].overload_probability)
    assert meas.resources["tx"].combined_mean == pytest.approx(pred.resources["tx"].combined_mean)


def test_slot_capacity():
    # loopback: 2 workers share the host's 2 cores and 8000 MB: 1 core and 4000 MB each
    assert slot_capacity("cpu-ddp-w2-lo", host_cores=2, host_memory_mb=8000) == {"compute": 100.0, "memory": 4000.0}
    cap = slot_capacity("cpu-ps-p1w2-1g", host_cores=2, host_memory_mb=8000)
    assert cap["tx"] == cap["rx"] == 125.0 and cap["compute"] == 200.0 and cap["memory"] == 8000.0
