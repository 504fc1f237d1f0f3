"""Does a label repeat? Test-retest between two measurements of the same jobs, and worker agreement.

A label is worth learning only if measuring the same job again gives the same value, and if
the two workers of one DDP job (which do the same work) agree. Both are judged with one rule
(``../shared/DESIGN.md``): two values ``a``, ``b`` of a label *agree* when

    |a - b| <= max(10 % of the label, 2 % of the step time)    (durations, s)
    |a - b| <= 10 % of the label                                (amounts)

i.e. a duration far shorter than the step is judged against the step. The *difference*
reported is ``|a - b| / max(mean(|a|, |b|), 0.2 x step)`` for durations (``/ mean`` for
amounts), so "median difference <= 10 %" and "agree" are the same test. The plain relative
difference ``|a - b| / mean`` is reported beside it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from driple.metrics import METRICS

LABELLERS = ("timeline", "kmeans")
TOL = 0.10
STEP_SHARE = 0.02  # durations agree within 2 % of the step


def _columns(labeller: str) -> list[str]:
    return [*METRICS, "step_time"] if labeller == "timeline" else [f"kmeans_{m}" for m in METRICS]


def differences(a, b, step, is_duration: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(judged, plain)`` relative differences of paired values (see module docstring)."""
    a, b, step = (np.asarray(x, dtype=np.float64) for x in (a, b, step))
    mean = (np.abs(a) + np.abs(b)) / 2
    plain = np.abs(a - b) / np.where(mean > 0, mean, 1.0)
    plain = np.where((mean == 0) & (a == b), 0.0, plain)
    scale = np.maximum(mean, STEP_SHARE / TOL * step) if is_duration else mean
    judged = np.abs(a - b) / np.where(scale > 0, scale, 1.0)
    judged = np.where((scale == 0) & (a == b), 0.0, judged)
    return judged, plain


def _summary(judged: np.ndarray, plain: np.ndarray) -> dict:
    ok = np.isfinite(judged)
    if not ok.any():
        return {"n": 0}
    return {"n": int(ok.sum()), "median_diff": float(np.median(judged[ok])),
            "agree_share": float(np.mean(judged[ok] <= TOL + 1e-12)),
            "median_rel_diff": float(np.nanmedian(plain[ok])), "max_rel_diff": float(np.nanmax(plain[ok]))}


def _ok_in_both(a, b) -> list:
    """Job ids (in ``a``'s order) measured ok in both tables (indexed by job_id)."""
    return [j for j in a.index if j in b.index and a.loc[j, "status"] == "ok" and b.loc[j, "status"] == "ok"]


def retest_table(first_dir: str | Path, again_dir: str | Path, labeller: str = "timeline",
                 max_contention: float | None = None) -> dict:
    """Per label: how the jobs of ``again_dir`` (re-measured) compare with ``first_dir``;
    ``max_contention``: leave out jobs measured with more other CPU than that (%) in either."""
    from driple.collect.results import load_results

    first = load_results(first_dir).set_index("job_id")
    again = load_results(again_dir).set_index("job_id")
    jobs = _ok_in_both(again, first)
    if max_contention is not None and "host_other_cpu_pct" in first and "host_other_cpu_pct" in again:
        jobs = [j for j in jobs if not any(float(t.loc[j, "host_other_cpu_pct"]) > max_contention
                                           for t in (first, again))]  # NaN: not busy
    out = {"jobs": jobs, "labels": {}}
    if not jobs:
        return out
    step = (first.loc[jobs, "step_time"].astype(float).to_numpy() + again.loc[jobs, "step_time"].astype(float).to_numpy()) / 2 \
        if "step_time" in first.columns and "step_time" in again.columns else np.zeros(len(jobs))
    for col in _columns(labeller):
        if col not in first.columns or col not in again.columns:
            continue
        a = first.loc[jobs, col].astype(float).to_numpy()
        b = again.loc[jobs, col].astype(float).to_numpy()
        out["labels"][col] = _summary(*differences(a, b, step, not col.endswith("amount") and col != "step_time"))
    return out


def worker_table(dataset_dir: str | Path, labeller: str = "timeline", jobs=None) -> dict:
    """Per label: how the two workers of each DDP job agree (from ``raw/<job>.json``)."""
    from driple.collect.results import load_results

    frame = load_results(dataset_dir)
    frame = frame[frame["status"].astype(str) == "ok"]
    if jobs is not None:
        frame = frame[frame["job_id"].isin(list(jobs))]
    part = "labels" if labeller == "timeline" else "kmeans"
    pairs: dict[str, list] = {c: [] for c in _columns(labeller)}
    steps = []
    for jid in frame["job_id"]:
        path = Path(dataset_dir) / "raw" / f"{jid}.json"
        try:
            per_rank = json.loads(path.read_text())["per_rank"]
        except (OSError, ValueError, KeyError):
            continue
        w = [per_rank[n].get(part, {}) for n in sorted(per_rank) if n.startswith("worker")]
        if len(w) < 2:
            continue
        steps.append(np.mean([per_rank[n].get("labels", {}).get("step_time", np.nan)
                              for n in per_rank if n.startswith("worker")]))
        for c in pairs:
            pairs[c].append((w[0].get(c, np.nan), w[1].get(c, np.nan)))
    out = {"jobs": len(steps), "labels": {}}
    step = np.nan_to_num(np.array(steps, dtype=np.float64))
    for c, v in pairs.items():
        if not v:
            continue
        arr = np.array(v, dtype=np.float64)
        out["labels"][c] = _summary(*differences(arr[:, 0], arr[:, 1], step,
                                                 not c.endswith("amount") and c != "step_time"))
    return out


def host_ratio_table(dataset_dir: str | Path, other_dir: str | Path) -> dict:
    """Per timeline label: the median ratio ``dataset / other`` over the jobs both measured
    (ok in both), e.g. the same grid on two CPU models. How far apart two hosts are is why
    rows of another CPU model make another setting."""
    from driple.collect.results import load_results

    a = load_results(dataset_dir).set_index("job_id")
    b = load_results(other_dir).set_index("job_id")
    jobs = _ok_in_both(a, b)
    out = {"jobs": len(jobs), "labels": {}}
    for col in _columns("timeline"):
        if not jobs or col not in a.columns or col not in b.columns:
            continue
        x = a.loc[jobs, col].astype(float).to_numpy()
        y = b.loc[jobs, col].astype(float).to_numpy()
        ok = np.isfinite(x) & np.isfinite(y) & (y > 0) & (x > 0)
        if ok.any():
            r = x[ok] / y[ok]
            out["labels"][col] = {"n": int(ok.sum()), "median_ratio": float(np.median(r)),
                                  "q25": float(np.quantile(r, 0.25)), "q75": float(np.quantile(r, 0.75))}
    return out
