"""The carried-prediction error table, by hand."""
import json

import numpy as np
import pytest

from driple.evaluation.hardware import error_table


def test_error_table_by_hand():
    parts = {
        "targets": ["step_time", "compute_burst_amount"],
        "measured": np.array([[1.0, 50.0], [2.0, 80.0], [4.0, 0.0]]),
        "trained": np.array([[0.5, 50.0], [1.0, 40.0], [2.0, 10.0]]),
        "carried": np.array([[1.1, 50.0], [1.8, 40.0], [4.4, 10.0]]),
        "low": np.array([[1.0, 40.0], [1.9, 30.0], [4.0, 0.0]]),
        "high": np.array([[1.2, 60.0], [2.1, 50.0], [4.8, 20.0]]),
    }
    table = error_table(parts)
    st = table["step_time"]
    assert st["trained"]["mape"] == pytest.approx(50.0) and st["trained"]["median_signed"] == pytest.approx(-50.0)
    # carried: +10 %, -10 %, +10 %: MAPE 10, median +10; intervals cover 1.0 and 4.0, not 2.0 (1.9-2.1 does)
    assert st["carried"]["mape"] == pytest.approx(10.0) and st["carried"]["median_signed"] == pytest.approx(10.0)
    assert st["carried"]["covered"] == pytest.approx(1.0)
    amount = table["compute_burst_amount"]  # the job measured at 0 is left out (no relative error)
    assert amount["carried"]["mape"] == pytest.approx(25.0)  # 0 % and 50 %
    assert amount["carried"]["covered"] == pytest.approx(0.5)  # 80 outside [30, 50]


def test_a_table_model_is_scored_beside_when_given():
    parts = {
        "targets": ["step_time"],
        "measured": np.array([[1.0], [2.0]]),
        "trained": np.array([[1.0], [2.0]]),
        "carried": np.array([[1.0], [2.0]]),
        "low": np.array([[0.9], [1.9]]), "high": np.array([[1.1], [2.1]]),
    }
    assert "table" not in error_table(parts)["step_time"]
    parts["table"] = np.array([[1.2], [1.6]])  # +20 %, -20 %
    row = error_table(parts)["step_time"]["table"]
    assert row["mape"] == pytest.approx(20.0) and row["median_signed"] == pytest.approx(0.0)


def test_report_sections_of_machines_and_gpu_memory(tmp_path):
    """The report's machine sections read the figures files beside the sections' JSON; none
    there, no section."""
    from driple.evaluation.reproduce.hardware_report import report_gpu_memory, report_machines

    assert report_machines(str(tmp_path)) == [] and report_gpu_memory(str(tmp_path)) == []
    (tmp_path / "hardware").mkdir()
    targets = {"step_time": {"trained": {"mape": 7.1}, "carried": {"mape": 24.8}, "table": {"mape": 11.3}}}
    (tmp_path / "hardware" / "ps-intel-to-amd.json").write_text(json.dumps(
        {"setting": "cpu-ps-p1w2-1g", "jobs": 83, "targets": targets}))
    text = "\n".join(report_machines(str(tmp_path)))
    assert "| step_time | 7.1 % / 24.8 % / 11.3 % |" in text and "drift" not in text
    (tmp_path / "gpu").mkdir()
    level = {"mape": 4.1, "max_ape": 8.1}
    (tmp_path / "gpu" / "memory.json").write_text(json.dumps({"provenance": {"command": "c", "date": "d"},
        "gpu-h200/gpu-ddp-w1-lo": {"jobs": 11, "gpus": ["NVIDIA H200"], "peak": level,
                                   "peak_at_sample_points": level, "low": level}}))
    assert "| gpu-h200/gpu-ddp-w1-lo | NVIDIA H200 | 11 | 4.1 % (max 8.1 %)" in "\n".join(report_gpu_memory(str(tmp_path)))
