"""Recompute a dataset's labels from its raw series: the check that shipped labels are reproducible.

Every ``ok`` row of ``results.csv`` was labelled from ``raw/<job_id>.npz`` (the sampler's
cumulative counters) over the per-worker steady-state windows recorded in
``raw/<job_id>.json``. :func:`relabel_job` repeats exactly that computation (rates, 2-cluster
k-means with its fixed seed, run merging, mean over workers) and :func:`check_dataset` compares
the result with the table, metric by metric.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from driple.errors import DripleError
from driple.metrics import target_names


def relabel_job(dataset_dir: str | Path, job_id: str) -> dict:
    """The row's labels (12 metrics and pattern shares, mean over workers) from its raw files."""
    from driple.collect.labeller import label_rates
    from driple.collect.results import series_time
    from driple.collect.series import read_raw

    raw = Path(dataset_dir) / "raw"
    detail_path, series_path = raw / f"{job_id}.json", raw / f"{job_id}.npz"
    for p in (detail_path, series_path):
        if not p.exists():
            raise DripleError(f"{p} is missing: the labels of {job_id} cannot be recomputed")
    try:
        detail = json.loads(detail_path.read_text())
    except ValueError as exc:
        raise DripleError(f"{detail_path} is not valid JSON ({exc})") from None
    series = read_raw(series_path)
    workers = [n for n in detail.get("iterations_ns", {}) if n.startswith("worker")]
    if not workers:
        raise DripleError(f"{detail_path} records no worker iterations")
    labels = []
    for name in workers:
        w = detail["per_rank"][name]["window_ns"]
        t0, t1 = series_time(series, w[0]), series_time(series, w[1])
        labels.append(label_rates(series.rates(name), t0=t0, t1=t1))
    return {k: float(np.nanmean([lab.get(k, np.nan) for lab in labels])) for k in labels[0]}


def check_dataset(dataset_dir: str | Path, progress: bool = True, rtol: float = 0.0) -> dict:
    """Relabel every ``ok`` job and compare with ``results.csv``.

    Returns ``{"jobs", "identical", "mismatched": [{"job_id", "metric", "table", "relabelled"}],
    "errors": {job_id: reason}}``; with ``rtol == 0`` only bit-identical values count as equal.
    """
    from tqdm.auto import tqdm

    from driple.collect.results import load_results

    frame = load_results(dataset_dir)
    frame = frame[frame["status"].astype(str) == "ok"]
    report = {"jobs": int(len(frame)), "identical": 0, "mismatched": [], "errors": {}}
    for row in tqdm(frame.to_dict("records"), desc="relabelling", unit="job", disable=not progress):
        try:
            again = relabel_job(dataset_dir, str(row["job_id"]))
        except DripleError as err:
            report["errors"][str(row["job_id"])] = str(err)
            continue
        same = True
        for m in target_names():
            a, b = float(row[m]), float(again[m])
            if math.isnan(a) and math.isnan(b):
                continue
            if not (a == b or (rtol and math.isclose(a, b, rel_tol=rtol))):
                same = False
                report["mismatched"].append({"job_id": str(row["job_id"]), "metric": m,
                                             "table": a, "relabelled": b})
        report["identical"] += int(same)
    return report
