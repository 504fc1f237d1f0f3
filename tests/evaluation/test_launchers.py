"""The launcher comparison: the retest rule applied to two datasets of the same jobs."""
import pytest

from driple.collect.results import ResultTable
from driple.evaluation.launchers import compare_launchers, format_comparison
from driple.metrics import METRICS


def _dataset(path, step_times, scale=1.0):
    table = ResultTable(path)
    for i, step in enumerate(step_times):
        row = {"job_id": f"job{i}", "status": "ok", "step_time": step * scale, "host_other_cpu_pct": 1.0}
        row.update({m: (100.0 if m.endswith("amount") else step / 2) for m in METRICS})
        table.append(row)
    return path


def test_same_labels_agree_and_a_shifted_step_time_does_not(tmp_path):
    steps = [0.1, 0.2, 0.4, 0.8]
    one = _dataset(tmp_path / "one", steps)
    near = compare_launchers(one, _dataset(tmp_path / "near", steps, scale=1.05))
    assert near["within_tolerance"] and len(near["jobs"]) == 4
    assert near["labels"]["step_time"]["median_diff"] == pytest.approx(0.05 / 1.025)
    far = compare_launchers(one, _dataset(tmp_path / "far", steps, scale=1.3))
    assert not far["within_tolerance"]
    assert "NOT every label" in format_comparison(far)


def test_a_busy_row_is_left_out(tmp_path):
    one = _dataset(tmp_path / "one", [0.1, 0.2])
    other = _dataset(tmp_path / "other", [0.1, 0.2])
    ResultTable(other).update_last({"job1": {"host_other_cpu_pct": 40.0}})
    assert compare_launchers(one, other)["jobs"] == ["job0"]
