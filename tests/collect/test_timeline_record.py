"""Recording a rank's timeline: the recorder's marks, its file, and the profiler (GPU) path.

The GPU path is tested on a constructed trace of CUDA kernels, NCCL kernels and allocator
events (no GPU here), labelled by the same code as the CPU marks, with a GPU-utilisation
series standing in for NVML's samples.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from driple.collect.labels.timeline import comm_runs, label_rank
from driple.collect.timeline.profiler import Event, apply_events
from driple.collect.timeline.record import COMM_KINDS, RankTimeline, load_job_timelines, save_job_timelines
from driple.collect.timeline.recorder import TimelineRecorder, allocated_bytes_reader, schedstat
from driple.errors import DripleError

MS = 1_000_000


def test_recorder_keeps_only_measured_iterations_and_closes_compute_at_the_last_gradient():
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    rec = TimelineRecorder("worker0", warmup=2)
    rec.watch(model.parameters())
    x = torch.randn(16, 8)
    for _ in range(5):
        rec.begin_iteration()
        loss = model(x).pow(2).mean()
        loss.backward()
        assert rec.last_grad_ns is not None  # set by the last gradient accumulation
        rec.compute_off(rec.last_grad_ns)
        rec.compute_on()
        rec.end_iteration()
    tl = rec.timeline()
    assert len(tl.iters) == 5 and len(tl.measured) == 3
    assert np.all(tl.iters[:, 1] > tl.iters[:, 0])
    # two compute runs per measured iteration: [start, last gradient] and [backward return, end]
    assert len(tl.compute) == 6
    assert np.all(tl.compute[:, 0] >= tl.measured[0, 0])
    first, second = tl.compute[0], tl.compute[1]
    assert tl.measured[0, 0] == first[0] and first[1] <= second[0] and second[1] == tl.measured[0, 1]
    # allocator samples only during measured iterations, and the activations show
    assert len(tl.mem) > 6 and tl.mem[0, 0] >= tl.measured[0, 0]
    assert tl.mem[:, 1].max() > tl.mem[:, 1].min()
    rec.unwatch()


def test_allocated_bytes_reader_sees_a_tensor_come_and_go():
    read, what = allocated_bytes_reader("cpu")
    assert read is not None, what
    before = read()
    t = torch.empty(5_000_000)  # 20 MB
    during = read()
    del t
    after = read()
    assert during - before == pytest.approx(20e6, rel=0.01)
    assert abs(after - before) < 1e6


def test_schedstat_counts_this_process():
    cpu, wait = schedstat()
    assert cpu > 0 and wait >= 0


def test_timeline_file_round_trip_and_damage(tmp_path):
    tl = RankTimeline({"name": "worker0", "role": "worker", "warmup": 1},
                      iters=[[0, 10], [10, 20]], compute=[[12, 18]], mem=[[12, 5], [15, 9]],
                      comm=[[1, -1, 0, 18, 20, 100, 100]])
    path = save_job_timelines(tmp_path / "j.timeline.npz", {"worker0": tl})
    back = load_job_timelines(path)["worker0"]
    for key, arr in tl.arrays().items():
        assert np.array_equal(getattr(back, key), arr)
    assert back.meta == tl.meta and back.measured.tolist() == [[10, 20]]
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DripleError, match="is not a readable timeline"):
        load_job_timelines(path)
    with pytest.raises(DripleError, match="has shape"):
        RankTimeline({"name": "w"}, iters=[[1, 2, 3]])


def _cuda_trace(n: int, period: int):
    """``n`` iterations: a 12 ms kernel stream (two kernels, 1 ms apart), then a 6 ms NCCL
    all-reduce; the allocator grows by 400 MB at 2 ms and frees it at 14 ms of each step."""
    events = []
    for i in range(n):
        s = i * period
        events += [
            Event("volta_sgemm_128x64_nn", "cuda", 7, s, s + 5 * MS),
            Event("void at::native::elementwise_kernel", "cuda", 7, s + 6 * MS, s + 12 * MS),
            Event("ncclKernel_AllReduce_RING_LL_Sum_float", "cuda", 9, s + 12 * MS, s + 18 * MS),
            Event("[memory]", "cuda", 1, s + 2 * MS, s + 2 * MS, 400_000_000),
            Event("[memory]", "cuda", 1, s + 14 * MS, s + 14 * MS, -400_000_000),
            Event("aten::mm", "cpu", 1, s, s + MS),  # host-side ops are not the device
        ]
    return events


def test_profiler_trace_of_cuda_and_nccl_is_labelled_like_cpu_marks():
    n, period = 22, 20 * MS
    rec = TimelineRecorder("worker0", warmup=0, device="cpu", memory=False)
    rec.marks_compute = False
    for i in range(n):
        rec.set_iteration_bounds(i * period, (i + 1) * period)
    apply_events(rec, _cuda_trace(n, period), cuda=True, base_bytes=1_000_000_000)
    tl = rec.timeline()
    assert tl.meta["source"].startswith("torch.profiler (CUDA")
    assert len(tl.compute) == 2 * n and len(tl.comm) == n
    assert set(tl.comm[:, 2]) == {COMM_KINDS["allreduce"]}
    assert tl.comm[:, 0].tolist() == list(range(n))  # each NCCL kernel in its own iteration
    # a fake NVML utilisation series at 10 ms: 90 % while kernels run (first 12 ms), 30 % after
    t_end = np.arange(1, 2 * n + 1) * 10 * MS
    util = np.where(((t_end - 1) % period) < 12 * MS, 90.0, 30.0)
    rates = pd.DataFrame({"compute": util}, index=pd.Index(t_end / 1e9, name="t"))
    out = label_rank(tl, comm_runs({"worker0": tl})["worker0"], rates=rates, series_start_ns=0,
                     window_bytes=(n * 50e6, n * 50e6))
    # compute: kernels 0-5 ms and 6-12 ms; the 1 ms gap is not below 1 ms, so 11 ms in 2 runs
    assert out["compute_burst_duration"] == pytest.approx(0.011)
    assert out["compute_bursts_per_iter"] == 2
    assert out["compute_idle_duration"] == pytest.approx(0.009)
    # the sample (0, 10] ms reads 90 and overlaps the runs 9 ms; (10, 20] reads 30 (its end is
    # idle) and overlaps them 2 ms (10-12): (9 * 90 + 2 * 30) / 11
    assert out["compute_burst_amount"] == pytest.approx((9 * 90 + 2 * 30) / 11)
    # network: the NCCL kernel, 6 ms per step; 50 MB per step -> 50e6 / 6e-3 B/s
    assert out["tx_burst_duration"] == pytest.approx(0.006)
    assert out["tx_burst_amount"] == pytest.approx(50e6 / 6e-3 / 1e6)
    # memory: 1.4 GB from 2 to 14 ms, 1.0 GB otherwise; midpoint 1.2 GB
    assert out["memory_burst_amount"] == pytest.approx(1400.0)
    assert out["memory_burst_duration"] == pytest.approx(0.012)
    assert out["memory_idle_duration"] == pytest.approx(0.008)


def test_memory_samples_are_stored_as_lossless_deltas(tmp_path):
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.integers(1, 50_000, 5000))
    v = 10**9 + np.cumsum(rng.integers(-(1 << 20), 1 << 20, 5000))
    tl = RankTimeline({"name": "worker0"}, iters=[[0, int(t[-1])]], mem=np.stack([t, v], axis=1))
    path = save_job_timelines(tmp_path / "m.timeline.npz", {"worker0": tl})
    with np.load(path) as f:
        assert "worker0/mem@delta" in f.files and "worker0/mem" not in f.files
    assert np.array_equal(load_job_timelines(path)["worker0"].mem, tl.mem)
    # a file written before the delta encoding still reads
    np.savez_compressed(tmp_path / "old.npz", meta=np.array('{"format": "driple-timeline-1", "ranks": {"worker0": {}}}'),
                        **{"worker0/mem": tl.mem, "worker0/iters": tl.iters})
    assert np.array_equal(load_job_timelines(tmp_path / "old.npz")["worker0"].mem, tl.mem)
