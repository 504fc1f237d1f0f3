"""Interval coverage of an evaluated split: conformal intervals fitted on calibration jobs (or
on the other folds' held-out families) and checked on the test jobs.
"""
from __future__ import annotations

import numpy as np


def pooled_coverage(names, nominal: float, runs) -> dict:
    """Coverage per target pooled over ``runs`` of ``(calibration measured, calibration
    predicted, test measured, test predicted)``: conformal intervals fitted on each run's
    calibration part, checked on its test part. A target never predicted (the analytic
    estimator's, NaN) gets None, not 0."""
    from driple.predict.intervals import ConformalIntervals

    inside, total, predicted = [], [], []
    for cal_y, cal_p, y, p in runs:
        ints = ConformalIntervals(coverage=nominal, names=names).fit(cal_y, np.clip(cal_p, 0, None))
        low, high = ints.interval(np.clip(p, 0, None))
        ok = np.isfinite(y)
        inside.append(np.where(ok, (y >= low) & (y <= high), False).sum(0))
        total.append(ok.sum(0))
        predicted.append(np.isfinite(p).any(0))
    per = np.sum(inside, 0) / np.maximum(np.sum(total, 0), 1)
    per = np.where(np.any(predicted, 0), per, np.nan)
    cov = {m: (float(v) if np.isfinite(v) else None) for m, v in zip(names, per)}
    cov["mean"] = float(np.nanmean(per)) if np.isfinite(per).any() else None
    cov["nominal"] = nominal
    return cov


def per_estimator(report: dict, nominal: float, runs_of) -> dict:
    """:func:`pooled_coverage` of every estimator, ``runs_of(name)`` giving its runs; an
    estimator with too few calibration jobs for a target gets its error."""
    from driple.errors import DripleError

    out = {}
    for name in report["estimators"]:
        try:
            out[name] = pooled_coverage(report["targets"], nominal, runs_of(name))
        except DripleError as err:  # too few calibration jobs
            out[name] = {"error": str(err)}
    return out


def fold_coverage(report: dict, nominal: float) -> dict:
    """Per estimator: conformal intervals fitted on each fold's calibration jobs, coverage
    measured on its test jobs (pooled over folds)."""
    return per_estimator(report, nominal, lambda name: [
        (f["calibration_measured"], f["calibration_predictions"][name], f["measured"], f["predictions"][name])
        for f in report["folds"]])


def coverage_other_families(report: dict, nominal: float) -> dict:
    """Per estimator, on a family split: each fold's intervals calibrated on the *held-out*
    residuals of the other folds (jobs of families their models had not seen, as a user's new
    model is), coverage measured on the fold's own held-out family (pooled over folds). The
    calibration jobs of :func:`fold_coverage` are of seen families, so their residuals are smaller
    than an unseen family's; this is what intervals calibrated on unseen-family residuals would
    cover. Empty for fewer than 3 folds."""
    folds = report["folds"]
    if len(folds) < 3:
        return {}

    def runs(name):
        for i, fold in enumerate(folds):
            others = [f for j, f in enumerate(folds) if j != i]
            yield (np.concatenate([f["measured"] for f in others]),
                   np.concatenate([f["predictions"][name] for f in others]),
                   fold["measured"], fold["predictions"][name])

    return per_estimator(report, nominal, lambda name: list(runs(name)))


def held_out_intervals(report: dict, name: str, nominal: float) -> dict | None:
    """``name``'s intervals calibrated on every fold's held-out residuals (plain dict; None when
    a target has too few): what the out-of-zoo set is checked against in the report."""
    from driple.errors import DripleError
    from driple.predict.intervals import ConformalIntervals

    folds = report["folds"]
    try:
        return ConformalIntervals(coverage=nominal, names=report["targets"]).fit(
            np.concatenate([f["measured"] for f in folds]),
            np.clip(np.concatenate([f["predictions"][name] for f in folds]), 0, None)).to_dict()
    except (DripleError, KeyError, ValueError):
        return None


def other_families_coverage_of(rep: dict):
    return ((rep.get("coverage_other_families") or {}).get("inspector") or {}).get("mean")
