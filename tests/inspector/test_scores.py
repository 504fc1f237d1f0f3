import math

import numpy as np
import pytest

from driple.inspector.scores import mape, nrmse, score_table
from driple.metrics import TARGETS


def test_nrmse_and_mape_by_hand():
    measured = np.array([[1.0, 10.0], [3.0, 0.0], [2.0, 20.0]])
    predicted = np.array([[2.0, 12.0], [3.0, 5.0], [1.0, 20.0]])
    # column 0: errors 1, 0, -1 -> RMSE sqrt(2/3); mean 2
    # column 1: errors 2, 5, 0 -> RMSE sqrt(29/3); mean 10
    assert nrmse(measured, predicted) == pytest.approx([math.sqrt(2 / 3) / 2, math.sqrt(29 / 3) / 10])
    # column 0: |1|/1, 0/3, |1|/2 -> mean 0.5 -> 50 %; column 1 skips the 0: 2/10, 0/20 -> 10 %
    assert mape(measured, predicted) == pytest.approx([50.0, 10.0])


def test_scores_skip_nan_and_zero_mean():
    measured = np.array([[np.nan, 0.0], [4.0, 0.0]])
    predicted = np.array([[100.0, 1.0], [5.0, 1.0]])
    assert nrmse(measured, predicted)[0] == pytest.approx(0.25)
    assert mape(measured, predicted)[0] == pytest.approx(25.0)
    assert np.isnan(nrmse(measured, predicted)[1]) and np.isnan(mape(measured, predicted)[1])


def test_score_table():
    rng = np.random.default_rng(0)
    y = rng.uniform(1, 2, (5, len(TARGETS)))
    table = score_table(y, y * 1.1)
    assert set(table) == {*TARGETS, "mean"}
    assert table["tx_burst_amount"]["mape"] == pytest.approx(10.0)
    assert table["mean"]["mape"] == pytest.approx(10.0)
    assert table["rx_idle_duration"]["n"] == 5
    y[:, 0] = np.nan
    assert score_table(y, y)["compute_burst_amount"] == {"nrmse": None, "mape": None, "n": 0, "n_mape": 0}


def test_table_summary_by_hand():
    """MAPE 10, 20, 40 % (one target without a MAPE), NRMSE 0.1, 0.3: median 20, mean 70/3,
    NRMSE 0.2; the step time's MAPE is its own; no step time: None."""
    from driple.inspector.scores import table_summary

    table = {"a": {"mape": 10.0, "nrmse": 0.1}, "b": {"mape": 40.0, "nrmse": None},
             "step_time": {"mape": 20.0, "nrmse": 0.3}, "c": {"mape": None, "nrmse": None},
             "mean": {"mape": 99.0, "nrmse": 9.9}}
    s = table_summary(table)
    assert s == {"mape_median": 20.0, "mape_mean": pytest.approx(70 / 3), "nrmse_mean": pytest.approx(0.2),
                 "step_time_mape": 20.0}
    assert table_summary({"a": {"mape": 1.0, "nrmse": 1.0}})["step_time_mape"] is None
