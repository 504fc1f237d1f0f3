"""Calibration of the timeline labels on a real 2-rank DDP job whose pattern is known.

Rank 0 computes 15 ms per iteration, rank 1 20 ms (conftest ``paced``); at the gradient
all-reduce rank 0 waits for rank 1, ~5 ms. The timeline labeller must recover 15 ms / 5 ms for
rank 0 within 10 %; the paper's k-means on the 100 Hz samples of the same job cannot (a 20 ms
period is two samples) and is printed beside it. Only a run where the ranks hardly waited for a
CPU (``run_delay_pct``) is judged; a busy host gets up to 3 attempts, then a skip that says
how busy it was.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from driple.collect import run_job
from driple.collect.job import JobSpec

pytestmark = pytest.mark.slow

PACED = f"{Path(__file__).resolve().parent / 'conftest.py'}:paced"
MAX_RUN_DELAY_PCT = 5.0  # ranks waiting for a CPU longer than this: the workload was disturbed
TOL = 0.10


def test_15_ms_compute_5_ms_wait_is_recovered(tmp_path, capsys):
    delays = []
    for attempt in range(3):
        spec = JobSpec(model=PACED, batch_size=4, knobs={"busy_ms": [15, 20]}, warmup=5, seed=attempt)
        result = run_job(spec, "cpu-ddp-w2-lo", seconds=1.0, out_dir=tmp_path / f"a{attempt}", timeout=120)
        assert result.ok, result.row["reason"]
        delays.append(result.row["run_delay_pct"])
        if delays[-1] <= MAX_RUN_DELAY_PCT:
            break
    else:
        pytest.skip(f"host too busy: the ranks waited {min(delays):.0f}-{max(delays):.0f} % of the time "
                    f"for a CPU in 3 attempts (limit {MAX_RUN_DELAY_PCT:g} %)")
    detail = json.loads(result.detail_path.read_text())
    rank0 = detail["per_rank"]["worker0"]
    v2, km = rank0["labels"], rank0["kmeans"]
    with capsys.disabled():
        print(f"\nrank 0, 15 ms compute / 5 ms wait: timeline {v2['compute_burst_duration'] * 1e3:.1f} / "
              f"{v2['compute_idle_duration'] * 1e3:.1f} ms; k-means on 100 Hz samples "
              f"{km['kmeans_compute_burst_duration'] * 1e3:.1f} / {km['kmeans_compute_idle_duration'] * 1e3:.1f} ms")
    assert v2["compute_burst_duration"] == pytest.approx(0.015, rel=TOL)
    assert v2["compute_idle_duration"] == pytest.approx(0.005, rel=TOL)
    assert v2["step_time"] == pytest.approx(0.020, rel=TOL)
    assert v2["compute_bursts_per_iter"] == 1
    # rank 1 hardly waits: one burst of ~20 ms per step
    rank1 = detail["per_rank"]["worker1"]["labels"]
    assert rank1["compute_burst_duration"] == pytest.approx(0.020, rel=TOL)
