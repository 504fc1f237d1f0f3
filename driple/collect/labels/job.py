"""Both labellers over one job's raw data: what ``results`` does after a job and ``relabel`` again.

- **timeline** (v2, the row's metric columns): :mod:`driple.collect.labels.timeline` on the
  ranks' recorded timelines, with amounts from the sampler's counters;
- **kmeans** (the paper's, ``kmeans_<metric>`` columns): :func:`~driple.collect.labels.kmeans.label_rates`
  on the sampled series over each worker's measured window.

One function, :func:`label_job`, so a label stored at collection time and one recomputed from
the stored files come from the same code, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from driple.collect.labels.timeline import RESOURCES as TIMELINE_RESOURCES

LABELLERS = ("timeline", "kmeans")
#: Row columns besides the resources' targets that the timeline labeller fills (mean over workers).
TIMELINE_EXTRAS = ("step_time", "step_time_iqr", "memory_low_mb", "memory_burst_pct",
                   *(f"{r}_bursts_per_iter" for r in TIMELINE_RESOURCES))
KMEANS_PREFIX = "kmeans_"


@dataclass
class JobLabels:
    """``row``: metric columns for ``results.csv``; ``per_rank``: everything per rank;
    ``agreement``: the largest relative difference between workers, per label."""

    row: dict = field(default_factory=dict)
    per_rank: dict = field(default_factory=dict)
    agreement: dict = field(default_factory=dict)


def series_time(series, t_ns: int) -> float:
    """A monotonic-clock instant (ns, as the workers log it) on the series' time axis (s)."""
    return (t_ns - series.start_ns) / 1e9


def window_bytes(df, t0: float, t1: float) -> tuple[float, float]:
    """Bytes sent and received in ``[t0, t1]`` (s), integrating the MB/s rates of ``df``."""
    t = (df["t"] if "t" in df.columns else df.index).to_numpy(dtype=float)
    if len(t) == 0:
        return 0.0, 0.0
    out = []
    for col in ("tx", "rx"):
        rate = df[col].to_numpy(dtype=float) * 1e6
        # rate[i] covers (t[i-1], t[i]]: clip each interval to the window
        first = max(0.0, 2 * t[0] - t[1]) if len(t) > 1 else 0.0
        lo = np.concatenate([[first], t[:-1]])
        overlap = np.clip(np.minimum(t, t1) - np.maximum(lo, t0), 0, None)
        out.append(float(np.nansum(rate * overlap)))
    return out[0], out[1]


def measured_window(tl) -> tuple[int, int]:
    """First measured iteration's start and last one's end (ns) of a rank's timeline."""
    m = tl.measured
    return int(m[0, 0]), int(m[-1, 1])


def label_job(timelines: dict, series=None, labellers=LABELLERS, shared_clock: bool = True) -> JobLabels:
    """Labels of one job from its ranks' timelines and (optional) sampled series.

    Workers that cannot be labelled raise :class:`~driple.errors.DripleError` (the row fails);
    a server that cannot be labelled gets an ``error`` entry instead (servers are not in the row).
    """
    from driple.collect.labels.kmeans import label_rates
    from driple.collect.labels.timeline import comm_runs, label_rank, mean_over_workers, worker_agreement
    from driple.errors import DripleError

    out = JobLabels()
    net = comm_runs(timelines, shared_clock=shared_clock)
    host_mem = float(series.meta.get("host_mem_bytes") or 0) if series is not None else 0.0
    for name, tl in timelines.items():
        rates = series.rates(name) if series is not None and name in series.names else None
        entry: dict = {}
        try:
            if len(tl.measured) == 0:
                raise DripleError(f"{name} logged {len(tl.iters)} iterations, none after the "
                                  f"{tl.warmup} warm-up ones")
            w0, w1 = measured_window(tl)
            entry.update({"window_ns": [w0, w1], "iterations": int(len(tl.measured))})
            t0 = t1 = nbytes = None
            if rates is not None:
                t0, t1 = series_time(series, w0), series_time(series, w1)
                nbytes = window_bytes(rates, t0, t1)
                entry.update({"window_s": [t0, t1], "tx_bytes": nbytes[0], "rx_bytes": nbytes[1]})
            if "timeline" in labellers:
                labels = label_rank(tl, net[name], rates=rates, window_bytes=nbytes,
                                    series_start_ns=series.start_ns if series is not None else None)
                if host_mem > 0:
                    labels["memory_burst_pct"] = labels["memory_burst_amount"] * 1e6 / host_mem * 100.0
                entry["labels"] = labels
            if "kmeans" in labellers and rates is not None:
                entry["kmeans"] = {KMEANS_PREFIX + k: float(v) for k, v in label_rates(rates, t0=t0, t1=t1).items()}
        except DripleError as err:
            if name.startswith("worker"):
                raise
            entry = {"error": str(err)}
        out.per_rank[name] = entry
    metrics = [f"{r}_{k}" for r in TIMELINE_RESOURCES for k in ("burst_amount", "burst_duration", "idle_duration")]
    for part, keys in (("labels", [*metrics, *TIMELINE_EXTRAS]), ("kmeans", None)):
        flat = {n: e[part] for n, e in out.per_rank.items() if part in e}
        if not flat:
            continue
        keys = keys or sorted({k for e in flat.values() for k in e})
        out.row.update(mean_over_workers(flat, keys))
        if part == "labels":
            out.agreement = worker_agreement(flat, [*metrics, "step_time"])
    return out
