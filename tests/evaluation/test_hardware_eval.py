"""The carried-prediction error table, by hand."""
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
