"""Error measures of predicted metrics: NRMSE and MAPE per target column.

- NRMSE = RMSE / mean of the measured values (unitless; 0.1 = an error of 10% of the mean).
- MAPE = mean of |predicted - measured| / |measured|, in %. Jobs whose measured value is 0 are
  left out of a column's MAPE (the ratio is undefined); ``n_mape`` counts the jobs used.

Measured values that are NaN (not measured) are left out of both.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from driple.metrics import target_names


def _columns(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_true.ndim == 1:
        y_true, y_pred = y_true[:, None], y_pred.reshape(-1, 1)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"shapes differ: measured {y_true.shape}, predicted {y_pred.shape}")
    return y_true, y_pred


def nrmse(y_true, y_pred) -> np.ndarray:
    """RMSE / mean(measured) per column; NaN where a column has no measured value or mean 0."""
    y_true, y_pred = _columns(y_true, y_pred)
    out = np.full(y_true.shape[1], np.nan)
    for j in range(y_true.shape[1]):
        ok = np.isfinite(y_true[:, j])
        mean = y_true[ok, j].mean() if ok.any() else 0.0
        if ok.any() and mean != 0:
            out[j] = np.sqrt(np.mean((y_pred[ok, j] - y_true[ok, j]) ** 2)) / abs(mean)
    return out


def mape(y_true, y_pred) -> np.ndarray:
    """Mean absolute percentage error (%) per column over jobs with a non-zero measured value."""
    y_true, y_pred = _columns(y_true, y_pred)
    out = np.full(y_true.shape[1], np.nan)
    for j in range(y_true.shape[1]):
        ok = np.isfinite(y_true[:, j]) & (y_true[:, j] != 0)
        if ok.any():
            out[j] = 100 * np.mean(np.abs(y_pred[ok, j] - y_true[ok, j]) / np.abs(y_true[ok, j]))
    return out


def _plain(value: float):
    return None if value is None or not math.isfinite(value) else float(value)


def score_table(y_true, y_pred, names: Optional[Sequence[str]] = None) -> dict:
    """``{name: {"nrmse", "mape", "n", "n_mape"}}`` plus ``"mean"`` (over columns with a value);
    NaN becomes None so the table serialises to JSON. ``names``: the columns' (default: the
    declared targets)."""
    names = target_names() if names is None else names
    y_true, y_pred = _columns(y_true, y_pred)
    e_nrmse, e_mape = nrmse(y_true, y_pred), mape(y_true, y_pred)
    table = {}
    for j, name in enumerate(names):
        table[name] = {
            "nrmse": _plain(e_nrmse[j]),
            "mape": _plain(e_mape[j]),
            "n": int(np.isfinite(y_true[:, j]).sum()),
            "n_mape": int((np.isfinite(y_true[:, j]) & (y_true[:, j] != 0)).sum()),
        }
    with np.errstate(all="ignore"):
        table["mean"] = {
            "nrmse": _plain(np.nanmean(e_nrmse)) if np.isfinite(e_nrmse).any() else None,
            "mape": _plain(np.nanmean(e_mape)) if np.isfinite(e_mape).any() else None,
        }
    return table


def table_summary(table: dict) -> dict:
    """A :func:`score_table` in four numbers, for comparing runs: the median and mean MAPE over
    the targets, the mean NRMSE, and the step time's MAPE (None without one)."""
    per = {k: v for k, v in table.items() if k != "mean"}
    mape = [v["mape"] for v in per.values() if v.get("mape") is not None]
    nrmse = [v["nrmse"] for v in per.values() if v.get("nrmse") is not None]
    return {"mape_median": float(np.median(mape)), "mape_mean": float(np.mean(mape)),
            "nrmse_mean": float(np.mean(nrmse)), "step_time_mape": per.get("step_time", {}).get("mape")}
