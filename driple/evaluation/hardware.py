"""How well a prediction carries to the machine a row was measured on.

An inspector trained on one machine's rows predicts each job of a dataset twice: as trained
(for its own machine) and carried to the row's machine (:mod:`driple.hardware.scaling`, the
spec each row names: :mod:`driple.hardware.rows`). Per target: MAPE, median signed error and
how often the 90 % interval covers the measurement. Rows measured on another CPU model than the
inspector's give the cross-machine error; the same jobs at two host speeds give the drift error.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from driple.errors import DripleError
from driple.hardware.rows import median_spec


def carried_predictions(predictor, dataset_dir: str, max_contention: Optional[float] = 10.0,
                        progress: bool = False, specs: str = "row") -> dict:
    """``{"measured", "trained", "carried", "low", "high", "specs", "jobs"}``: arrays
    ``[jobs, targets]`` of the dataset's quiet jobs, predicted as trained and carried to each
    row's spec (``specs="row"``) or to the median of the dataset's row specs (``"median"``:
    one probe's noise, ±10 % on a VM from job to job, averaged out); ``low``/``high``: the
    carried prediction's interval."""
    from driple.hardware.rows import dataset_specs

    ds = _dataset(predictor, dataset_dir, progress=progress, max_contention=max_contention)
    row_specs = dataset_specs(ds.frame, dataset_dir)
    if specs not in ("row", "median"):
        raise DripleError(f"specs must be 'row' or 'median', not {specs!r}")
    specs = row_specs if specs == "row" else [median_spec(row_specs)] * len(row_specs)
    graphs = [ds[i] for i in range(len(ds))]
    targets = list(predictor.inspector.targets)
    trained = _values(predictor.use_hardware("trained").predict_many(graphs), targets)
    carried = np.full_like(trained, np.nan)
    low, high = np.full_like(trained, np.nan), np.full_like(trained, np.nan)
    for key in dict.fromkeys(s.to_json() for s in specs):
        idx = [i for i, s in enumerate(specs) if s.to_json() == key]
        predictor.use_hardware(specs[idx[0]])
        profiles = predictor.predict_many([graphs[i] for i in idx])
        carried[idx] = _values(profiles, targets)
        if profiles[0].intervals:
            low[idx] = [[p.intervals[t][0] for t in targets] for p in profiles]
            high[idx] = [[p.intervals[t][1] for t in targets] for p in profiles]
    predictor.use_hardware("trained")
    return {"measured": np.asarray(ds.targets, dtype=np.float64), "trained": trained, "carried": carried,
            "low": low, "high": high, "specs": specs, "jobs": list(ds.frame["job_id"]), "targets": targets,
            "dataset": ds}


def table_predictions(predictor, train_dir: str, dataset, max_contention: Optional[float] = 10.0,
                      seed: int = 0) -> np.ndarray:
    """The best table model (gradient boosting on graph-level numbers, ``hgb``) fitted on every
    quiet row of ``train_dir`` (another machine's; its iterations chosen on a random 15 % of
    those architectures) and asked for the jobs of ``dataset``, in the inspector's target order."""
    from driple.inspector.baselines import HGBBaseline
    from driple.inspector.splits import random_split

    train = _dataset(predictor, train_dir, max_contention=max_contention)
    split = random_split(train, seed=seed, fractions=(0.85, 0.15, 0.0, 0.0))
    hgb = HGBBaseline(random_state=seed).fit(train, split.train, split.val)
    names = list(train.target_names)
    out = hgb.predict(dataset)
    return np.stack([out[:, names.index(t)] if t in names else np.full(len(out), np.nan)
                     for t in predictor.inspector.targets], 1)


def _dataset(predictor, dataset_dir: str, **kwargs):
    """``dataset_dir``'s jobs as graphs built with the inspector's own options."""
    from driple.inspector.dataset import InspectorDataset

    options = predictor.inspector.build_options()
    return InspectorDataset(dataset_dir, **kwargs,
                            **{k: options[k] for k in ("groups", "grouping", "features", "seed") if k in options})


def _values(profiles, targets) -> np.ndarray:
    return np.array([[p.metrics[t] for t in targets] for p in profiles], dtype=np.float64)


def error_table(parts: dict) -> dict:
    """Per target: ``{"trained": {...}, "carried": {...}}`` with ``mape``, ``median_signed`` (%
    of the measurement) and, for the carried prediction, ``covered`` (share of jobs inside the
    interval)."""
    y = parts["measured"]
    out = {}
    for j, t in enumerate(parts["targets"]):
        ok = np.isfinite(y[:, j]) & (y[:, j] > 0)
        if not ok.any():
            continue
        row = {}
        for name in [n for n in ("trained", "carried", "table") if n in parts]:
            rel = parts[name][ok, j] / y[ok, j] - 1.0
            row[name] = {"mape": float(100 * np.mean(np.abs(rel))), "median_signed": float(100 * np.median(rel))}
        inside = (parts["low"][ok, j] <= y[ok, j]) & (y[ok, j] <= parts["high"][ok, j])
        row["carried"]["covered"] = float(np.mean(inside)) if np.isfinite(parts["low"][ok, j]).all() else None
        out[t] = row
    return out


def evaluate_carry(setting: str, dataset_dir: str, progress: bool = False, specs: str = "row",
                   table_from: Optional[str] = None) -> dict:
    """The whole measurement for one inspector and one dataset, as plain JSON-able data;
    ``table_from``: a dataset of the inspector's own machine, on which the best table model is
    fitted to be scored beside it (:func:`table_predictions`)."""
    from driple.hardware.rows import machines
    from driple.predict.predictor import Predictor

    predictor = Predictor.load(setting)
    if predictor.trained_hardware() is None:
        raise DripleError(f"the {setting} inspector records no host figures: nothing to carry from")
    parts = carried_predictions(predictor, dataset_dir, progress=progress, specs=specs)
    if table_from:
        parts["table"] = table_predictions(predictor, table_from, parts["dataset"])
    return {"setting": predictor.setting, "dataset": str(dataset_dir), "jobs": len(parts["jobs"]), "specs": specs,
            "table_from": table_from, "trained_on": predictor.trained_hardware().summary(),
            "machines": machines(parts["specs"]), "targets": error_table(parts)}


def drift_check(setting: str, first_dir: str, second_dir: str, target: str = "step_time",
                progress: bool = False, specs: str = "row") -> dict:
    """The same jobs measured at two host speeds (two datasets of one grid, each row with its
    probe): per job, the carried prediction's error at each speed, and the predicted ratio of
    the two speeds against the measured one. Jobs are paired by ``job_id``."""
    from driple.predict.predictor import Predictor

    predictor = Predictor.load(setting)
    a = carried_predictions(predictor, first_dir, progress=progress, specs=specs)
    b = carried_predictions(predictor, second_dir, progress=progress, specs=specs)
    j = a["targets"].index(target)
    where = {jid: i for i, jid in enumerate(b["jobs"])}
    rows = []
    for i, jid in enumerate(a["jobs"]):
        if jid not in where:
            continue
        k = where[jid]
        ma, mb, pa, pb = a["measured"][i, j], b["measured"][k, j], a["carried"][i, j], b["carried"][k, j]
        rows.append({"job_id": jid, "measured": [float(ma), float(mb)], "carried": [float(pa), float(pb)],
                     "error_pct": [float(100 * (pa / ma - 1)), float(100 * (pb / mb - 1))],
                     "ratio_measured": float(mb / ma), "ratio_predicted": float(pb / pa),
                     "ratio_error_pct": float(100 * ((pb / pa) / (mb / ma) - 1))})
    if not rows:
        raise DripleError(f"{first_dir} and {second_dir} share no job id")
    ratio_err = np.array([r["ratio_error_pct"] for r in rows])
    errs = np.array([r["error_pct"] for r in rows])
    return {"setting": predictor.setting, "target": target, "specs": specs,
            "datasets": [str(first_dir), str(second_dir)],
            "jobs": len(rows), "mape": [float(np.mean(np.abs(errs[:, 0]))), float(np.mean(np.abs(errs[:, 1])))],
            "ratio_mape": float(np.mean(np.abs(ratio_err))), "ratio_within_5pct": float(np.mean(np.abs(ratio_err) <= 5)),
            "ratio_median_signed": float(np.median(ratio_err)), "rows": rows}


def carried_summary(result: dict, machine: str, command: str = "") -> dict:
    """One registry ``carried`` record from :func:`evaluate_carry`'s ``result``: the machine the
    jobs ran on (``machine``, in words: "AMD EPYC under a one-core cgroup quota"), how many, and
    the carried prediction's step-time MAPE and median MAPE over the duration targets."""
    targets = result.get("targets") or {}
    carried = {t: (r.get("carried") or {}).get("mape") for t, r in targets.items()}
    if carried.get("step_time") is None:
        raise DripleError(f"{result.get('dataset', '?')}: no carried step time in the evaluation")
    durations = [v for t, v in carried.items() if t.endswith("_duration") and v is not None]
    return {"machine": machine, "dataset": result.get("dataset"), "jobs": int(result.get("jobs") or 0),
            "step_time_mape": round(float(carried["step_time"]), 2),
            "durations_median_mape": round(float(np.median(durations)), 2) if durations else None,
            "how": command or "driple hardware evaluate"}
