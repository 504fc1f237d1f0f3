"""Real distributed jobs: DDP and parameter server on loopback, and how failures end.

Each test launches real worker processes (seconds each), so they are marked slow; they run in
CI all the same. Every test checks that no process is left behind.
"""
from __future__ import annotations

import json
import math

import numpy as np
import psutil
import pytest

from driple.collect import run_job
from driple.collect.job import JobSpec
from driple.metrics import METRICS

pytestmark = pytest.mark.slow


def _no_children_left():
    kids = [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != "zombie"]
    assert kids == [], f"processes left behind: {[p.cmdline()[:4] for p in kids]}"


def test_ddp_sends_one_model_per_iteration(ddp_job):
    """Ring all-reduce over 2 workers: each sends and receives ~1x the parameter bytes per iteration."""
    out, result = ddp_job
    row = result.row
    assert result.ok, row["reason"]
    _no_children_left()
    assert row["param_bytes"] == 4 * (64 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)
    assert row["iterations"] >= 20
    for key in ("tx_bytes_per_iter", "rx_bytes_per_iter"):
        assert row[key] == pytest.approx(row["param_bytes"], rel=0.10), key
    assert all(math.isfinite(row[m]) for m in METRICS)
    assert row["tx_burst_amount"] > 0 and row["compute_burst_amount"] > 0
    assert row["samples_per_s"] == pytest.approx(2 * 32 / row["iter_time_mean_s"], rel=0.3)
    assert row["probe_gemm_gflops"] > 0.1 and row["probe_copy_gb_s"] > 0.01  # measured before the job
    assert result.raw_path == out / "raw" / f"{row['job_id']}.npz" and result.raw_path.exists()
    assert not (out / "raw" / f"{row['job_id']}.work").exists()
    from driple.collect.results import load_results

    table = load_results(out)  # run_job records the row by default
    assert list(table["job_id"]) == [row["job_id"]]
    assert table["tx_bytes_per_iter"][0] == pytest.approx(row["tx_bytes_per_iter"])

    detail = json.loads(result.detail_path.read_text())
    assert set(detail["per_rank"]) == {"worker0", "worker1"}
    for name, rank in detail["per_rank"].items():
        assert rank["labels"].keys() >= set(METRICS)
        # the comm hook saw every gradient byte, in buckets, in the last iteration
        assert sum(rank["buckets_last_iteration_bytes"]) == row["param_bytes"]
        iters = np.array(detail["iterations_ns"][name])
        assert len(iters) == detail["warmup"] + rank["iterations"]
        assert rank["window_ns"] == [int(iters[5, 1]), int(iters[-1, 2])]  # warm-up excluded


def test_parameter_server_job_has_network(tmp_path, tiny_model):
    """1 server + 2 synchronous workers, started by torchrun (the launcher finds their pids)."""
    spec = JobSpec(model=tiny_model, batch_size=16, knobs={"width": 256}, warmup=3)
    result = run_job(spec, "cpu-ps-p1w2-lo", seconds=2, out_dir=tmp_path, timeout=120, launcher="torchrun")
    row = result.row
    assert result.ok, row["reason"]
    _no_children_left()
    assert row["setting"] == "cpu-ps-p1w2-lo"
    assert row["tx_burst_amount"] > 0 and row["rx_burst_amount"] > 0
    # push of all gradients, pull of all parameters (one server): ~1x model each way, plus RPC framing
    assert row["tx_bytes_per_iter"] == pytest.approx(row["param_bytes"], rel=0.25)
    assert row["rx_bytes_per_iter"] == pytest.approx(row["param_bytes"], rel=0.25)
    detail = json.loads(result.detail_path.read_text())
    server = detail["per_rank"]["server0"]
    assert server["rx_bytes"] > 0 and server["tx_bytes"] > 0
    pids = {name: rank["target"]["pid"] for name, rank in detail["ranks"].items()}
    assert len(set(pids.values())) == 3  # the ranks themselves, not the torchrun agent


def test_crashing_worker_fails_the_job_cleanly(tmp_path, tiny_model, pids_of, host_load):
    spec = JobSpec(model=tiny_model, batch_size=8, knobs={"width": 64, "crash_at": 3}, warmup=2)
    result = run_job(spec, "cpu-ddp-w2-lo", seconds=30, out_dir=tmp_path, timeout=120)
    row = result.row
    assert row["status"] == "failed"
    assert "worker1" in row["reason"] and "injected crash" in row["reason"], row["reason"]
    assert row["duration_s"] < 120  # noticed, not ended by the timeout
    assert pids_of(str(tmp_path)) == []
    _no_children_left()
    assert "injected crash" in (tmp_path / "raw" / f"{row['job_id']}.log").read_text()
    # at once: start-up and the crash take seconds, unless the host is busy
    host_load.check(row["duration_s"] < 60, f"the crash took {row['duration_s']:.0f} s to notice")


def test_hung_job_is_killed_at_the_timeout(tmp_path, tiny_model, pids_of, host_load):
    spec = JobSpec(model=tiny_model, batch_size=8, knobs={"width": 64, "hang_at": 3}, warmup=2)
    result = run_job(spec, "cpu-ddp-w2-lo", seconds=5, out_dir=tmp_path, timeout=12)
    row = result.row
    assert row["status"] == "failed" and row["reason"].startswith("timeout"), row["reason"]
    assert row["duration_s"] >= 12
    assert pids_of(str(tmp_path)) == []
    _no_children_left()
    # killed at the timeout: 12 s, the 3 s kill grace and clean-up, unless the host is busy
    host_load.check(row["duration_s"] < 30, f"the hung job ended {row['duration_s']:.0f} s after its start")


def test_a_job_that_cannot_reach_its_iterations_within_the_cap_fails_with_that_reason(tmp_path, tiny_model, pids_of):
    """20 iterations of a ~ms step cannot fit in a cap of 1 ms: a failed row says so in one line."""
    spec = JobSpec(model=tiny_model, batch_size=8, knobs={"width": 64}, warmup=2)
    result = run_job(spec, "cpu-ddp-w2-lo", seconds=1, out_dir=tmp_path, timeout=120,
                     min_iterations=20, max_seconds=0.001)
    row = result.row
    assert row["status"] == "failed"
    assert "MeasurementCapError" in row["reason"] and "over the job's cap of 0.001 s" in row["reason"], row["reason"]
    assert "\n" not in row["reason"]
    assert pids_of(str(tmp_path)) == []
    _no_children_left()


def test_a_rank_that_dies_mid_measurement_fails_the_row_and_keeps_its_log(tmp_path, tiny_model):
    """A crash after warm-up, while the timeline is being recorded: no timeline, a clear reason."""
    spec = JobSpec(model=tiny_model, batch_size=8, knobs={"width": 64, "crash_at": 12}, warmup=2)
    result = run_job(spec, "cpu-ddp-w2-lo", seconds=5, out_dir=tmp_path, timeout=120)
    row = result.row
    assert row["status"] == "failed" and "injected crash" in row["reason"], row["reason"]
    assert row["timeline_path"] is None
    _no_children_left()


def test_ps_server_is_labelled_from_its_rounds(tmp_path, tiny_model):
    spec = JobSpec(model=tiny_model, batch_size=16, knobs={"width": 256}, warmup=3)
    result = run_job(spec, "cpu-ps-p1w2-lo", seconds=1, out_dir=tmp_path, timeout=120)
    assert result.ok, result.row["reason"]
    detail = json.loads(result.detail_path.read_text())
    server = detail["per_rank"]["server0"]["labels"]
    worker = detail["per_rank"]["worker0"]["labels"]
    # the server receives what the workers push: its rx runs are the workers' tx runs (2 workers)
    assert server["rx_busy_s"] >= worker["tx_busy_s"] * 0.99
    # a synchronous server steps once per worker iteration
    assert server["step_time"] == pytest.approx(worker["step_time"], rel=0.2)
    assert worker["tx_burst_duration"] > 0 and worker["rx_burst_duration"] > 0
