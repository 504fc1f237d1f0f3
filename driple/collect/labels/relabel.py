"""Recompute a dataset's labels from its raw files: the check that shipped labels are reproducible.

Every ``ok`` row of ``results.csv`` was labelled from ``raw/<job_id>.timeline.npz`` (the
ranks' timelines) and ``raw/<job_id>.npz`` (the sampler's cumulative counters) by
:func:`driple.collect.labels.job.label_job`. :func:`relabel_job` repeats exactly that, for
either labeller, and :func:`check_dataset` compares the result with the table, column by column.
"""
from __future__ import annotations

import math
from pathlib import Path

from driple.errors import DripleError
from driple.metrics import targets


def _job_labels(dataset_dir: str | Path, job_id: str, labellers):
    from driple.collect.labels.job import LABELLERS, label_job
    from driple.collect.series import read_raw
    from driple.collect.timeline.record import load_job_timelines

    for labeller in labellers:
        if labeller not in LABELLERS:
            raise DripleError(f"unknown labeller {labeller!r}; use one of {', '.join(LABELLERS)}")
    raw = Path(dataset_dir) / "raw"
    timeline_path, series_path = raw / f"{job_id}.timeline.npz", raw / f"{job_id}.npz"
    for p in (timeline_path, series_path):
        if not p.exists():
            raise DripleError(f"{p} is missing: the labels of {job_id} cannot be recomputed")
    return label_job(load_job_timelines(timeline_path), read_raw(series_path), labellers=tuple(labellers))


def relabel_job(dataset_dir: str | Path, job_id: str, labeller: str = "timeline") -> dict:
    """The row's label columns recomputed from its raw files: the 12 burst/idle metrics and
    ``step_time`` (``labeller="timeline"``) or the ``kmeans_*`` columns (``"kmeans"``)."""
    return _job_labels(dataset_dir, job_id, (labeller,)).row


def rewrite_labels(dataset_dir: str | Path, progress: bool = True) -> dict:
    """Recompute both labellers for every ``ok`` job and write them into ``results.csv`` (and
    the per-rank labels into ``raw/<job>.json``): how a changed label definition reaches a
    dataset without measuring again. Returns ``{"jobs", "rewritten", "errors"}``."""
    import json

    from tqdm.auto import tqdm

    from driple.collect.labels.job import LABELLERS
    from driple.collect.results import ResultTable, load_results

    frame = load_results(dataset_dir)
    frame = frame[frame["status"].astype(str) == "ok"]
    values, errors = {}, {}
    for jid in tqdm([str(j) for j in frame["job_id"]], desc="relabelling", unit="job", disable=not progress):
        try:
            labels = _job_labels(dataset_dir, jid, LABELLERS)
        except DripleError as err:
            errors[jid] = str(err)
            continue
        values[jid] = labels.row
        detail_path = Path(dataset_dir) / "raw" / f"{jid}.json"
        if detail_path.exists():
            detail = json.loads(detail_path.read_text())
            for name, entry in labels.per_rank.items():
                detail.setdefault("per_rank", {}).setdefault(name, {}).update(entry)
            detail["worker_agreement"] = labels.agreement
            tmp = detail_path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(detail, indent=1))
            tmp.replace(detail_path)
    rewritten = ResultTable(dataset_dir).update_last(values)
    return {"jobs": int(len(frame)), "rewritten": rewritten, "errors": errors}


def columns_of(labeller: str) -> list[str]:
    """The result-table columns a labeller fills and :func:`check_dataset` compares."""
    from driple.collect.labels.job import KMEANS_PREFIX

    metrics = [t.name for t in targets() if t.resource is not None]
    return [*metrics, "step_time"] if labeller == "timeline" else [KMEANS_PREFIX + m for m in metrics]


def check_dataset(dataset_dir: str | Path, progress: bool = True, rtol: float = 0.0,
                  labeller: str = "timeline") -> dict:
    """Relabel every ``ok`` job and compare with ``results.csv``.

    Returns ``{"jobs", "identical", "mismatched": [{"job_id", "metric", "table", "relabelled"}],
    "errors": {job_id: reason}}``; with ``rtol == 0`` only bit-identical values count as equal.
    """
    from tqdm.auto import tqdm

    from driple.collect.results import load_results

    frame = load_results(dataset_dir)
    frame = frame[frame["status"].astype(str) == "ok"]
    columns = columns_of(labeller)
    report = {"jobs": int(len(frame)), "identical": 0, "mismatched": [], "errors": {}}
    for row in tqdm(frame.to_dict("records"), desc=f"relabelling ({labeller})", unit="job",
                    disable=not progress):
        try:
            again = relabel_job(dataset_dir, str(row["job_id"]), labeller)
        except DripleError as err:
            report["errors"][str(row["job_id"])] = str(err)
            continue
        same = True
        for m in columns:
            a, b = float(row.get(m, math.nan)), float(again.get(m, math.nan))
            if math.isnan(a) and math.isnan(b):
                continue
            if not (a == b or (rtol and math.isclose(a, b, rel_tol=rtol))):
                same = False
                report["mismatched"].append({"job_id": str(row["job_id"]), "metric": m,
                                             "table": a, "relabelled": b})
        report["identical"] += int(same)
    return report
