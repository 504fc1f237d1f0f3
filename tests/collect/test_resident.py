"""The runtime's part of a worker's memory, from RSS series worked out by hand."""
import json

import numpy as np
import pytest

from driple.collect.resident import job_resident_mb, resident_memory_mb


def _raw(path, rss_mb_by_worker):
    """A sampler file (driple.collect.series format) with these workers' RSS and a server's."""
    from driple.collect.series import FORMAT

    arrays = {f"worker{i}/rss_bytes": np.asarray(v, dtype=np.int64) * 1_000_000
              for i, v in enumerate(rss_mb_by_worker)}
    names = [f"worker{i}" for i in range(len(rss_mb_by_worker))] + ["server0"]
    meta = {"format": FORMAT, "targets": [{"name": n} for n in names]}
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays,
             **{"server0/rss_bytes": np.array([10**12] * 4)})  # a server is not a worker


def test_one_job_by_hand(tmp_path):
    # worker 0's second half 300, 310 -> median 305; worker 1's 290, 300 -> 295; median 300; label 100
    _raw(tmp_path / "j.npz", [[50, 60, 300, 310], [40, 50, 290, 300]])
    assert job_resident_mb(str(tmp_path / "j.npz"), 100.0) == pytest.approx(200.0)
    assert job_resident_mb(str(tmp_path / "missing.npz"), 100.0) is None


def test_a_dataset_median_over_its_ok_jobs(tmp_path, label_columns):
    from driple.metrics import METRICS, label_version

    if label_version() != "v2":
        pytest.skip("memory in MB: labels v2")
    tail_head, tail_values = label_columns()
    header = ["job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "status",
              *METRICS, *tail_head, "raw_path"]
    lines = [",".join(header)]
    for i, (label, rss, status) in enumerate([(100, 300, "ok"), (200, 420, "ok"), (100, 900, "failed")]):
        _raw(tmp_path / f"j{i}.npz", [[rss] * 4, [rss] * 4])
        metrics = {m: "1" for m in METRICS} | {"memory_burst_amount": str(label)}
        lines.append(",".join([f"j{i}", "cpu-ddp-w2-lo", "mlp", "mlp", '"{}"', "8", "sgd", status,
                               *[metrics[m] for m in METRICS], *tail_values, f"j{i}.npz"]))
    (tmp_path / "results.csv").write_text("\n".join(lines) + "\n")
    out = resident_memory_mb(str(tmp_path))
    assert out["jobs"] == 2 and out["memory"] == pytest.approx(210.0)  # median of 200 and 220
    assert resident_memory_mb(str(tmp_path), jobs=["j1"])["memory"] == pytest.approx(220.0)
    assert json.dumps(out)
