"""Prediction intervals by split conformal prediction on log-ratio residuals.

Why conformal and not an ensemble: an ensemble multiplies the cost of every prediction and
gives no coverage guarantee; split conformal prediction costs nothing at prediction time and,
for jobs exchangeable with the calibration jobs, covers the measured value with at least the
nominal probability (Vovk et al. 2005; Lei et al. 2018, "Distribution-free predictive inference
for regression").

The metrics span orders of magnitude (bursts of 10 ms and of 3 s), so residuals are taken on a
log scale: ``r = log(measured + eps) - log(predicted + eps)`` per metric, with ``eps`` a small
floor per metric (1 % of the median measured value) that keeps zeros finite. The interval of a
prediction ``p`` is ``[(p + eps) e^{q_lo} - eps, (p + eps) e^{q_hi} - eps]`` (clipped at 0),
where ``q_lo``/``q_hi`` are the finite-sample-corrected ``alpha/2`` and ``1 - alpha/2``
quantiles of the calibration residuals: an asymmetric, multiplicative interval.

The guarantee is marginal (over jobs), not per job; :func:`coverage` measures it on held-out
jobs, and that measured figure is what the model card reports.

The calibration jobs must be a set of their own: not the training jobs, and not the
validation jobs that chose the model and stopped its training (their residuals are smaller than
a new job's, so intervals calibrated on them under-cover). :func:`calibrate_intervals` takes
them explicitly; :func:`test_coverage` measures the result on the untouched test jobs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.metrics import target_names

METHOD = "split-conformal-log"


def _quantile_level(n: int, level: float) -> float:
    """Finite-sample corrected quantile level ``ceil((n + 1) level) / n`` (capped at 1)."""
    return min(1.0, math.ceil((n + 1) * level) / n)


@dataclass
class ConformalIntervals:
    """Per-metric multiplicative intervals of a nominal ``coverage``.

    Learned attributes (after :meth:`fit`): ``eps``, ``q_lo``, ``q_hi`` (one float per metric)
    and ``n_calibration``.
    """

    coverage: float = 0.9
    names: Sequence[str] = field(default_factory=target_names)
    eps: list = field(default_factory=list)
    q_lo: list = field(default_factory=list)
    q_hi: list = field(default_factory=list)
    n_calibration: int = 0

    def fit(self, y_true, y_pred) -> "ConformalIntervals":
        """Calibrate on measured ``y_true`` and predicted ``y_pred`` ``[n, metrics]`` of jobs
        the model was not fitted on (NaN measurements are ignored per metric)."""
        if not 0 < self.coverage < 1:
            raise DripleError(f"coverage must be in (0, 1), not {self.coverage}")
        y_true, y_pred = self._arrays(y_true, y_pred)
        alpha = 1 - self.coverage
        self.eps, self.q_lo, self.q_hi = [], [], []
        for j in range(y_true.shape[1]):
            ok = np.isfinite(y_true[:, j])
            if ok.sum() < 2:
                raise DripleError(f"too few calibration jobs with a measured {self.names[j]}")
            meas = np.clip(y_true[ok, j], 0, None)
            med = float(np.median(meas))
            eps = 0.01 * med if med > 0 else 1e-6
            r = np.log(meas + eps) - np.log(np.clip(y_pred[ok, j], 0, None) + eps)
            n = len(r)
            self.eps.append(eps)
            self.q_lo.append(float(np.quantile(r, 1 - _quantile_level(n, 1 - alpha / 2))))
            self.q_hi.append(float(np.quantile(r, _quantile_level(n, 1 - alpha / 2))))
        self.n_calibration = int(y_true.shape[0])
        return self

    def _arrays(self, y_true, y_pred=None):
        y_true = np.atleast_2d(np.asarray(y_true, dtype=np.float64))
        if y_true.shape[1] != len(self.names):
            raise DripleError(f"expected {len(self.names)} metrics per job, got {y_true.shape[1]}")
        if y_pred is None:
            return y_true
        y_pred = np.atleast_2d(np.asarray(y_pred, dtype=np.float64))
        if y_pred.shape != y_true.shape:
            raise DripleError(f"shapes differ: measured {y_true.shape}, predicted {y_pred.shape}")
        return y_true, y_pred

    def interval(self, y_pred) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` arrays shaped like ``y_pred`` ``[n, metrics]`` (or ``[metrics]``)."""
        if not self.q_hi:
            raise DripleError("the intervals are not calibrated (call fit first)")
        pred = np.asarray(y_pred, dtype=np.float64)
        flat = np.atleast_2d(pred)
        self._arrays(flat)
        eps, lo, hi = (np.asarray(v) for v in (self.eps, self.q_lo, self.q_hi))
        base = np.clip(flat, 0, None) + eps
        low = np.clip(base * np.exp(lo) - eps, 0, None)
        high = np.clip(base * np.exp(hi) - eps, 0, None)
        return (low, high) if pred.ndim == 2 else (low[0], high[0])

    def to_dict(self) -> dict:
        return {"method": METHOD, "coverage": self.coverage, "names": list(self.names),
                "eps": list(self.eps), "q_lo": list(self.q_lo), "q_hi": list(self.q_hi),
                "n_calibration": self.n_calibration}

    @classmethod
    def from_dict(cls, record: dict) -> "ConformalIntervals":
        if not isinstance(record, dict) or record.get("method") != METHOD:
            raise DripleError(f"unknown interval method {record.get('method') if isinstance(record, dict) else record!r}")
        return cls(coverage=float(record["coverage"]), names=tuple(record["names"]),
                   eps=list(record["eps"]), q_lo=list(record["q_lo"]), q_hi=list(record["q_hi"]),
                   n_calibration=int(record.get("n_calibration", 0)))


def coverage(y_true, low, high, names: Optional[Sequence[str]] = None) -> dict:
    """Measured coverage: per metric the fraction of jobs whose measured value lies in
    ``[low, high]`` (NaN measurements left out), plus ``"mean"`` over metrics and ``"n"``.
    ``names``: the columns' (default: the declared targets)."""
    names = target_names() if names is None else names
    y_true = np.atleast_2d(np.asarray(y_true, dtype=np.float64))
    low, high = np.atleast_2d(low), np.atleast_2d(high)
    if not (y_true.shape == low.shape == high.shape):
        raise DripleError(f"shapes differ: {y_true.shape}, {low.shape}, {high.shape}")
    out = {}
    for j, name in enumerate(names):
        ok = np.isfinite(y_true[:, j])
        inside = (y_true[ok, j] >= low[ok, j]) & (y_true[ok, j] <= high[ok, j])
        out[name] = float(inside.mean()) if ok.any() else None
    values = [v for v in out.values() if v is not None]
    out["mean"] = float(np.mean(values)) if values else None
    out["n"] = int(y_true.shape[0])
    return out


def calibrate_intervals(model, calibration: Sequence, coverage: float = 0.9) -> ConformalIntervals:
    """Intervals for ``model`` (anything with ``predict(graphs) -> [n, targets]`` and, optionally,
    ``targets``: a :class:`~driple.inspector.checkpoint.TrainedInspector`, an estimator)
    calibrated on the ``calibration`` jobs only (graphs with measured ``y``; a set apart from
    training and validation, e.g. the calibration part of the evaluation's splits).
    Predictions are clipped at 0 first, as the profiles show them."""
    from driple.inspector.graph_inputs import stack_targets

    calibration = list(calibration)
    if len(calibration) < 2:
        raise DripleError(f"calibration needs at least two jobs, got {len(calibration)}")
    names = tuple(getattr(model, "targets", None) or getattr(model, "targets_", None) or target_names())
    predicted = np.clip(model.predict(calibration), 0, None)
    return ConformalIntervals(coverage=coverage, names=names).fit(stack_targets(calibration), predicted)


def test_coverage(intervals: ConformalIntervals, model, test: Sequence) -> dict:
    """:func:`coverage` of ``intervals`` around ``model``'s predictions on the ``test`` jobs
    (never used for training, choice or calibration)."""
    from driple.inspector.graph_inputs import stack_targets

    test = list(test)
    if not test:
        raise DripleError("no test jobs to measure the coverage on")
    low, high = intervals.interval(np.clip(model.predict(test), 0, None))
    return coverage(stack_targets(test), low, high, names=list(intervals.names))


test_coverage.__test__ = False  # a library function, not a pytest test
