"""Timeline labels (v2) on tiny hand-made timelines; every expected value is worked out by hand.

Times are in ns; the helpers build iterations of a fixed period so the medians are exact.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driple.collect.labels.timeline import (
    busy_per_span,
    comm_runs,
    covered,
    iteration_spans,
    label_rank,
    mean_over_runs,
    memory_per_span,
    union,
    worker_agreement,
)
from driple.collect.timeline.record import COMM_KINDS, RankTimeline
from driple.errors import DripleError

MS = 1_000_000


def test_union_sorts_merges_overlaps_and_small_gaps():
    iv = [[20, 30], [0, 10], [5, 12], [12, 14], [40, 40]]
    assert union(iv).tolist() == [[0, 14], [20, 30]]  # touching [12,14] joins; empty [40,40] dropped
    assert union(iv, merge_gap=7).tolist() == [[0, 30]]  # gap 14 -> 20 is 6 < 7
    assert union(iv, merge_gap=6).tolist() == [[0, 14], [20, 30]]  # 6 is not < 6
    assert union([]).shape == (0, 2)


def test_covered_and_busy_per_span():
    runs = np.array([[2, 5], [7, 9]])
    assert covered(runs, [0, 2, 3, 6, 8, 10]).tolist() == [0, 0, 1, 3, 4, 5]
    spans = np.array([[0, 6], [6, 10], [10, 12]])
    busy, count = busy_per_span(runs, spans)
    assert busy.tolist() == [3, 2, 0]
    assert count.tolist() == [1, 1, 0]
    # a run across a boundary counts in both spans, its time split between them
    busy, count = busy_per_span(np.array([[4, 8]]), np.array([[0, 6], [6, 10]]))
    assert busy.tolist() == [2, 2] and count.tolist() == [1, 1]


def test_iteration_spans_run_start_to_start_and_last_to_its_end():
    iters = np.array([[0, 8], [10, 18], [20, 27]])
    assert iteration_spans(iters).tolist() == [[0, 10], [10, 20], [20, 27]]


def test_memory_midpoint_rule():
    # curve 10 on [0,2), 30 on [2,5), 20 on [5,8), 10 on [8,10): peak 30, low 10, mid 20;
    # above 20 only on [2,5): 3 ns. 20 is not above the midpoint.
    mem = np.array([[0, 10], [2, 30], [5, 20], [8, 10]])
    peak, low, above = memory_per_span(mem, np.array([[0, 10]]))
    assert (peak[0], low[0], above[0]) == (30, 10, 3)
    # the sample in force at a span's start carries over: span [3, 10) starts at 30
    peak, low, above = memory_per_span(mem, np.array([[3, 10]]))
    assert (peak[0], low[0], above[0]) == (30, 10, 2)
    # a flat curve has no burst
    peak, low, above = memory_per_span(np.array([[0, 7]]), np.array([[0, 10]]))
    assert (peak[0], low[0], above[0]) == (7, 7, 0)


def test_mean_over_runs_weights_samples_by_overlap():
    # samples cover (0,10], (10,20], (20,30], (30,40]; the run [5, 25) overlaps 5, 10, 5
    t_end = np.array([10, 20, 30, 40])
    values = np.array([100.0, 50.0, 0.0, 80.0])
    assert mean_over_runs(np.array([[5, 25]]), t_end, values) == pytest.approx((500 + 500 + 0) / 20)
    assert np.isnan(mean_over_runs(np.zeros((0, 2), dtype=np.int64), t_end, values))


def _periodic(n: int, period: int, busy: int, warmup: int = 0, name: str = "worker0",
              comm_after: bool = True) -> RankTimeline:
    """``n`` iterations of ``period`` ns: compute for ``busy`` ns, then an all-reduce until the
    end; memory climbs 100 -> 300 at a quarter of the step and drops at three quarters."""
    starts = np.arange(n) * period
    iters = np.stack([starts, starts + period], axis=1)
    compute = np.stack([starts, starts + busy], axis=1)[warmup:]
    comm = [(i, -1, COMM_KINDS["allreduce"], s + busy, s + period, 1000, 1000)
            for i, s in enumerate(starts) if i >= warmup and comm_after]
    mem = []
    for s in starts[warmup:]:
        mem += [(s, 100), (s + period // 4, 300), (s + 3 * period // 4, 100)]
    return RankTimeline({"name": name, "role": "worker", "warmup": warmup}, iters=iters,
                        compute=compute, comm=np.array(comm, dtype=np.int64).reshape(-1, 7),
                        mem=np.array(mem))


def test_label_rank_recovers_15_ms_compute_5_ms_wait():
    tl = _periodic(25, 20 * MS, 15 * MS, warmup=3)
    net = comm_runs({"worker0": tl})["worker0"]
    out = label_rank(tl, net, window_bytes=(22 * 4e6, 22 * 2e6))  # 22 measured iterations
    assert out["iterations"] == 22
    assert out["step_time"] == pytest.approx(0.020)
    assert out["compute_burst_duration"] == pytest.approx(0.015)
    assert out["compute_idle_duration"] == pytest.approx(0.005)
    assert out["compute_bursts_per_iter"] == 1
    assert out["tx_burst_duration"] == pytest.approx(0.005)
    assert out["tx_idle_duration"] == pytest.approx(0.015)
    # 4 MB per iteration sent in 5 ms bursts: 800 MB/s; received 2 MB: 400 MB/s
    assert out["tx_burst_amount"] == pytest.approx(800.0)
    assert out["rx_burst_amount"] == pytest.approx(400.0)
    # memory above the midpoint 200 from 5 ms to 15 ms of each step; peak 300 bytes
    assert out["memory_burst_duration"] == pytest.approx(0.010)
    assert out["memory_idle_duration"] == pytest.approx(0.010)
    assert out["memory_burst_amount"] == pytest.approx(300 / 1e6)
    assert out["step_time_iqr"] == pytest.approx(0.0)


def test_gaps_below_one_ms_merge_into_one_burst():
    period = 20 * MS
    tl = _periodic(22, period, 15 * MS)
    # split each compute run by a 0.5 ms gap: still one 15 ms burst (the merged gap counts)
    split = []
    for s, e in tl.compute:
        split += [(s, s + 7 * MS), (s + 7 * MS + MS // 2, e)]
    tl.compute = np.array(split)
    out = label_rank(tl, {"tx": np.zeros((0, 2)), "rx": np.zeros((0, 2))})
    assert out["compute_bursts_per_iter"] == 1
    assert out["compute_burst_duration"] == pytest.approx(0.015)  # the merged gap counts as busy
    # a 2 ms gap is not merged: two bursts, 13 ms of compute
    split = []
    for s, e in _periodic(22, period, 15 * MS).compute:
        split += [(s, s + 7 * MS), (s + 9 * MS, e)]
    tl.compute = np.array(split)
    out = label_rank(tl, {"tx": np.zeros((0, 2)), "rx": np.zeros((0, 2))})
    assert out["compute_bursts_per_iter"] == 2
    assert out["compute_burst_duration"] == pytest.approx(0.013)
    assert out["compute_idle_duration"] == pytest.approx(0.007)


def test_medians_over_iterations_ignore_an_outlier_step():
    tl = _periodic(21, 20 * MS, 15 * MS)
    # one iteration with a 100 ms stall inside its compute
    tl.iters[10:, :] += 100 * MS
    tl.iters[9, 1] += 100 * MS
    tl.compute[9, 1] += 100 * MS
    tl.compute[10:] += 100 * MS
    tl.mem[:, 0] = np.where(tl.mem[:, 0] >= 10 * 20 * MS, tl.mem[:, 0] + 100 * MS, tl.mem[:, 0])
    out = label_rank(tl, {"tx": np.zeros((0, 2)), "rx": np.zeros((0, 2))})
    assert out["step_time"] == pytest.approx(0.020)
    assert out["compute_burst_duration"] == pytest.approx(0.015)


def test_compute_amount_from_the_sampled_counter_over_compute_runs():
    tl = _periodic(20, 20 * MS, 15 * MS)
    # a sampled CPU series at 5 ms: 100 % during compute, 20 % while waiting
    t_end = np.arange(1, 20 * 4 + 1) * 5 * MS
    phase = (t_end - 1) % (20 * MS)
    values = np.where(phase < 15 * MS, 100.0, 20.0)
    rates = pd.DataFrame({"compute": values}, index=pd.Index(t_end / 1e9, name="t"))
    out = label_rank(tl, {"tx": np.zeros((0, 2)), "rx": np.zeros((0, 2))}, rates=rates, series_start_ns=0)
    assert out["compute_burst_amount"] == pytest.approx(100.0)


def test_joint_interval_of_a_collective_across_ranks():
    a = _periodic(20, 20 * MS, 15 * MS, name="worker0")
    b = _periodic(20, 20 * MS, 15 * MS, name="worker1")
    b.comm[:, 3] += 2 * MS  # worker1 joins each all-reduce 2 ms later, and leaves 1 ms later
    b.comm[:, 4] += 1 * MS
    runs = comm_runs({"worker0": a, "worker1": b})
    first = runs["worker0"]["tx"][0].tolist()
    assert first == [17 * MS, 20 * MS]  # last to join (15 + 2) -> first to leave (20)
    assert runs["worker1"]["rx"][0].tolist() == first
    own = comm_runs({"worker0": a, "worker1": b}, shared_clock=False)
    assert own["worker1"]["tx"][0].tolist() == [17 * MS, 21 * MS]


def test_push_pull_split_at_the_servers_entry_and_release():
    w = RankTimeline({"name": "worker0", "role": "worker", "warmup": 0},
                     iters=[[0, 200]], comm=[[0, 0, COMM_KINDS["pushpull"], 100, 180, 10, 10]])
    s = RankTimeline({"name": "server0", "role": "server", "warmup": 0},
                     iters=[[0, 160]], serve=[[0, 0, 130, 150]])
    runs = comm_runs({"server0": s, "worker0": w})
    assert runs["worker0"]["tx"].tolist() == [[100, 130]]
    assert runs["worker0"]["rx"].tolist() == [[150, 180]]
    assert runs["server0"]["rx"].tolist() == [[100, 130]]
    assert runs["server0"]["tx"].tolist() == [[150, 180]]
    # a push the server did not log stays whole for both directions
    s.serve = np.zeros((0, 4), dtype=np.int64)
    runs = comm_runs({"server0": s, "worker0": w})
    assert runs["worker0"]["tx"].tolist() == runs["worker0"]["rx"].tolist() == [[100, 180]]


def test_too_few_iterations_is_a_clear_error():
    tl = _periodic(12, 20 * MS, 15 * MS, warmup=2)
    with pytest.raises(DripleError, match="measured 10 iterations after warm-up; labels need at least 20"):
        label_rank(tl, {"tx": np.zeros((0, 2)), "rx": np.zeros((0, 2))})


def test_worker_agreement_is_the_largest_relative_difference():
    per_rank = {"worker0": {"a": 10.0, "b": 0.0}, "worker1": {"a": 8.0, "b": 0.0}, "server0": {"a": 1.0}}
    assert worker_agreement(per_rank, ["a", "b"]) == {"a": pytest.approx(0.2), "b": 0.0}
