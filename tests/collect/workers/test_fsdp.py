"""A real FSDP job (two ranks on loopback): it shards as the graph says and is labelled."""
from __future__ import annotations

import json
import math

import numpy as np
import psutil
import pytest

from driple.collect import run_job
from driple.collect.job import JobSpec
from driple.collect.timeline.record import COMM_KINDS, load_job_timelines
from driple.metrics import METRICS

pytestmark = pytest.mark.slow


def test_fsdp_job_gathers_and_scatters_every_unit(tmp_path, tiny_model):
    spec = JobSpec(model=tiny_model, batch_size=16, knobs={"width": 256}, warmup=3)
    result = run_job(spec, "cpu-fsdp-w2-lo", seconds=2, out_dir=tmp_path, timeout=120)
    row = result.row
    assert result.ok, row["reason"]
    kids = [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != "zombie"]
    assert kids == []
    assert row["setting"] == "cpu-fsdp-w2-lo" and all(math.isfinite(row[m]) for m in METRICS)
    params = row["param_bytes"]
    assert params == 4 * (64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10)
    # all-gather forward and backward, reduce-scatter: 3 x half the model each way, plus framing
    assert 1.5 * params <= row["tx_bytes_per_iter"] <= 2.5 * params

    detail = json.loads(result.detail_path.read_text())
    for name in ("worker0", "worker1"):  # every Linear its own unit, as the strategy's policy says
        assert detail["ranks"][name]["info"]["fsdp_units"] == ["0", "2", "4"]
    timelines = load_job_timelines(result.raw_path.with_suffix(".timeline.npz"))
    for name in ("worker0", "worker1"):
        comm = timelines[name].comm
        last = comm[comm[:, 0] == comm[:, 0].max()]
        kinds = sorted(int(k) for k in last[:, 2])
        # three Linear units: gathered forward and backward, scattered once each
        assert kinds == [COMM_KINDS["allgather"]] * 6 + [COMM_KINDS["reducescatter"]] * 3
        assert int(last[:, 5].sum()) == pytest.approx(3 * params / 2, rel=0.01)
        assert np.all(last[:, 4] >= last[:, 3])
