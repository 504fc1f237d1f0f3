import numpy as np
import pytest

from driple.errors import DripleError
from driple.metrics import target_names
from driple.predict.intervals import ConformalIntervals, coverage

N = len(target_names())  # the declared targets: 13 in labels v2


def _noisy(n, rng, sigma=0.3):
    pred = rng.uniform(1, 100, size=(n, N))
    meas = pred * np.exp(rng.normal(0.1, sigma, size=(n, N)))  # biased, multiplicative noise
    return meas, pred


def test_conformal_coverage_on_fresh_jobs():
    rng = np.random.default_rng(0)
    meas, pred = _noisy(400, rng)
    iv = ConformalIntervals(0.9).fit(meas, pred)
    new_meas, new_pred = _noisy(4000, rng)
    low, high = iv.interval(new_pred)
    cov = coverage(new_meas, low, high)
    assert 0.87 <= cov["mean"] <= 0.94
    assert all(0.85 <= cov[m] <= 0.95 for m in iv.names)
    # the bias is learned: the interval is not centred on the prediction
    assert np.all(np.asarray(iv.q_hi) > np.abs(np.asarray(iv.q_lo)))


def test_interval_contains_prediction_scaled_by_quantiles():
    # 5 jobs predicted 1, measured 0.5 .. 8: median 2, so eps = 0.02 and the residuals are
    # log((m + 0.02) / 1.02). At 80 % with 5 jobs the corrected level ceil(6 * 0.9) / 5 caps at 1:
    # q_lo is the smallest residual, log(0.52 / 1.02), q_hi the largest, log(8.02 / 1.02).
    meas = np.tile([[0.5], [1.0], [2.0], [4.0], [8.0]], (1, N))
    iv = ConformalIntervals(0.8).fit(meas, np.ones((5, N)))
    assert iv.eps == pytest.approx([0.02] * N)
    assert iv.q_lo == pytest.approx([np.log(0.52 / 1.02)] * N)
    assert iv.q_hi == pytest.approx([np.log(8.02 / 1.02)] * N)
    low, high = iv.interval(np.full(N, 4.0))
    # a prediction of 4 becomes [4.02 * 0.52 / 1.02 - 0.02, 4.02 * 8.02 / 1.02 - 0.02]
    assert low == pytest.approx([2.0294117647] * N) and high == pytest.approx([31.588235294] * N)
    assert np.all(low < 4.0) and np.all(high > 4.0)


def test_finite_sample_level_with_few_jobs():
    # with 9 calibration jobs the 90% interval needs the largest residual (ceil(10 * .95)/9 > 1)
    meas = np.tile(np.arange(1, 10, dtype=float)[:, None], (1, N))
    pred = np.ones((9, N))
    iv = ConformalIntervals(0.9).fit(meas, pred)
    eps = 0.01 * 5
    assert iv.q_hi[0] == pytest.approx(np.log((9 + eps) / (1 + eps)))


def test_coverage_counts_by_hand_and_skips_nan():
    meas = np.array([[1.0] * N, [5.0] * N, [np.nan] * N])
    low = np.zeros((3, N))
    high = np.full((3, N), 2.0)
    cov = coverage(meas, low, high)
    assert cov["compute_burst_amount"] == 0.5 and cov["mean"] == 0.5 and cov["n"] == 3


def test_round_trip_and_errors():
    rng = np.random.default_rng(1)
    iv = ConformalIntervals(0.9).fit(*_noisy(50, rng))
    again = ConformalIntervals.from_dict(iv.to_dict())
    p = rng.uniform(1, 5, size=(3, N))
    assert np.allclose(again.interval(p)[0], iv.interval(p)[0])
    with pytest.raises(DripleError, match="not calibrated"):
        ConformalIntervals().interval(p)
    with pytest.raises(DripleError, match="coverage"):
        ConformalIntervals(1.5).fit(*_noisy(5, rng))
    with pytest.raises(DripleError, match=f"{N} metrics"):
        iv.interval(np.ones((2, 3)))
    with pytest.raises(DripleError, match="method"):
        ConformalIntervals.from_dict({"method": "ensemble"})


class _Job:
    def __init__(self, y):
        import torch

        self.y = torch.tensor([y], dtype=torch.float64)


class _Fixed:
    """A 'model' that predicts 10 for every target of every job."""
    targets = ("a", "b")

    def predict(self, graphs):
        return np.full((len(graphs), 2), 10.0)


def test_calibrated_on_the_calibration_jobs_only_and_measured_on_test():
    from driple.predict.intervals import calibrate_intervals, test_coverage

    # calibration: measured 5..15 against a prediction of 10 -> residuals log((m + eps) / (10 + eps))
    calibration = [_Job([m, 2 * m]) for m in (5.0, 8.0, 10.0, 12.0, 15.0)]
    iv = calibrate_intervals(_Fixed(), calibration, coverage=0.8)
    assert iv.names == ("a", "b") and iv.n_calibration == 5
    eps = 0.01 * 10.0  # 1 % of the median measured value of column a
    assert iv.q_lo[0] == pytest.approx(np.log((5 + eps) / (10 + eps)))  # n=5 at 80 %: the extremes
    assert iv.q_hi[0] == pytest.approx(np.log((15 + eps) / (10 + eps)))
    test = [_Job([4.0, 20.0]), _Job([11.0, 20.0]), _Job([16.0, 20.0]), _Job([9.0, 20.0])]
    cov = test_coverage(iv, _Fixed(), test)
    assert cov["a"] == 0.5 and cov["b"] == 1.0 and cov["n"] == 4  # 11 and 9 inside [5, 15]
    with pytest.raises(DripleError, match="at least two jobs"):
        calibrate_intervals(_Fixed(), calibration[:1])


def test_shipping_calibrates_on_the_splits_calibration_part():
    from types import SimpleNamespace

    from driple.shipping.ship import calibrate

    jobs = [_Job([m, m]) for m in (5.0, 8.0, 10.0, 12.0, 15.0, 100.0, 200.0, 9.0, 11.0)]
    inspector = SimpleNamespace(targets=("a", "b"), info={}, predict=_Fixed().predict)
    split = SimpleNamespace(val=[5, 6], calibration=[0, 1, 2, 3, 4], test=[7, 8])
    result = calibrate(inspector, jobs, split, nominal=0.8)
    assert result["calibrated_on"] == "calibration" and result["n_calibration"] == 5
    assert result["mean"] == 1.0  # 9 and 11 lie in [5, 15]; the validation jobs (100, 200) are unused
    old = SimpleNamespace(val=[5, 6], test=[7, 8])  # splits without a calibration part: validation
    assert calibrate(inspector, jobs, old, nominal=0.8)["calibrated_on"] == "validation"
