"""The noise floor of each label: the error of "predicting" a re-measurement with the first one.

A retest dataset (``<setting>-retest``) measures some jobs of a dataset a second time. No
model can predict a label better than the label repeats, so the error of using the first
measurement as the prediction of the second is the floor an estimator's error is judged
against:

    floor NRMSE = NRMSE(measured = retest, predicted = first)    (same for MAPE)

with :func:`driple.inspector.scores.nrmse` / :func:`~driple.inspector.scores.mape`. Jobs are
paired by ``job_id``; both tables are read as the dataset reads them
(:func:`driple.inspector.dataset.read_results`: the last ``ok`` row of each job, contended
measurements left out). :mod:`driple.collect.retest` gives the per-job differences behind it
(the agreement rule of the design notes, worker agreement).
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.dataset import DEFAULT_MAX_CONTENTION, read_results
from driple.inspector.scores import mape, nrmse
from driple.metrics import target_names

#: A best error within this factor of the floor is as good as the label allows.
FLOOR_FACTOR = 2.0


def retest_dir(dataset_dir: str) -> Optional[str]:
    """``<dataset_dir>-retest`` if it holds a results.csv, else None: the retest jobs measured
    again in the same session as the dataset (the floor is judged against it)."""
    path = osp.normpath(dataset_dir) + "-retest"
    return path if osp.exists(osp.join(path, "results.csv")) else None


def other_session_dirs(dataset_dir: str) -> list[str]:
    """``<dataset_dir>-retest-<name>`` directories holding a results.csv, sorted: the retest
    jobs measured in other sessions (another day's host). Compared with the dataset, they show
    how far a host drifts between sessions, which a same-session retest cannot see."""
    base = osp.normpath(dataset_dir) + "-retest-"
    return sorted(p for p in glob.glob(glob.escape(base) + "*") if osp.isfile(osp.join(p, "results.csv")))


def noise_floor(first_dir: str, again_dir: str, columns: Optional[Sequence[str]] = None,
                max_contention: Optional[float] = DEFAULT_MAX_CONTENTION) -> dict:
    """Per label column (default: the declared targets) the floor NRMSE and MAPE (%) over the
    jobs measured in both directories: ``{"first", "again", "jobs": [...], "labels": {column:
    {"nrmse", "mape", "n"}}}`` (None where a column is missing or never measured twice)."""
    columns = list(target_names() if columns is None else columns)
    first = read_results(osp.join(first_dir, "results.csv"), max_contention).set_index("job_id")
    again = read_results(osp.join(again_dir, "results.csv"), max_contention).set_index("job_id")
    jobs = [j for j in again.index if j in first.index]
    if not jobs:
        raise DripleError(f"no job of {again_dir} is also an ok job of {first_dir}: not a retest of it")
    out = {"first": str(first_dir), "again": str(again_dir), "jobs": [str(j) for j in jobs],
           "labels": {}}
    for col in columns:
        if col not in first.columns or col not in again.columns:
            out["labels"][col] = {"nrmse": None, "mape": None, "n": 0}
            continue
        a = first.loc[jobs, col].astype(float).to_numpy()
        b = again.loc[jobs, col].astype(float).to_numpy()
        ok = np.isfinite(a) & np.isfinite(b)
        e_nrmse, e_mape = (float(f(b[ok], a[ok])[0]) if ok.any() else float("nan") for f in (nrmse, mape))
        out["labels"][col] = {"nrmse": _plain(e_nrmse), "mape": _plain(e_mape), "n": int(ok.sum())}
    return out


def _plain(v: float):
    return float(v) if np.isfinite(v) else None


def floor_check(scores: dict, floor: dict, factor: float = FLOOR_FACTOR, key: str = "nrmse") -> dict:
    """Per label of ``floor["labels"]``: the floor, the best estimator of ``scores``
    (``{estimator: score table}``) by ``key``, its error, their ratio and whether it is within
    ``factor`` times the floor (None where either is unknown)."""
    out = {}
    for label, entry in floor["labels"].items():
        errors = {name: table[label][key] for name, table in scores.items()
                  if label in table and table[label].get(key) is not None}
        best = min(errors, key=errors.get) if errors else None
        f = entry.get(key)
        ratio = errors[best] / f if best is not None and f else None
        out[label] = {"floor": f, "best": best, "error": errors.get(best),
                      "ratio": ratio, "within": None if ratio is None else bool(ratio <= factor)}
    return out
