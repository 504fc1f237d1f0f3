"""Burst/idle labelling of a resource time series, and the 12 burst/idle metrics of one job.

As in the Driple paper, the samples of each resource are split into two clusters by k-means on
their value (scikit-learn ``KMeans``, seeded); the cluster with the higher centre is *burst*.
Consecutive samples with the same label form a *run*. Then:

- burst amount = time-weighted mean value of the burst samples (with a fixed period this is the
  plain mean). By default (``trim=1``) the first and last sample of every burst run longer than
  2 samples are left out of this mean: they straddle the burst's start or end and mix burst and
  idle, which biases the amount low by up to half a sample per edge (4% for a 100 ms burst at
  100 Hz). With the trim, amount x burst duration = what a burst used; ``trim=0`` is the
  paper's plain mean.
- burst duration / idle duration = mean length (s) of a burst / idle run.

Choices (documented because they change numbers):

- **Window edges.** The first and last runs are usually cut by the window, so they are left out
  of the duration means when at least one run of the same kind lies fully inside the window;
  otherwise (e.g. a single burst in the window) the cut runs are used as they are.
- **Degenerate series.** When the two k-means centres are less than ``min_gap`` apart (or the
  series is constant) there is one level. If that level is within ``min_gap`` of zero (e.g. no
  network traffic in a 1-worker job) everything is idle: burst amount = the mean (about 0),
  burst duration = 0, idle duration = window. Otherwise everything is burst: burst amount =
  the mean, burst duration = window, idle duration = 0. Never NaN.
- **Pattern shares** (fractions of time, summing to 1): BIB = idle runs with a burst on both
  sides plus the bursts next to them; I = the other idle runs (before the first or after the
  last burst, or all of a silent series); B = burst runs with no BIB idle next to them, i.e. a
  single uninterrupted burst. The paper found 92-100% of samples in BIB.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from driple.errors import DripleError
from driple.metrics import resources, targets

SHARES = ("I", "BIB", "B")


class BurstIdleLabeller:
    """Split a 1-d series into burst and idle samples with 2-means; summarise the runs.

    Parameters
    ----------
    random_state : seed of the k-means initialisation.
    min_gap : two centres closer than this (units of the values) make a one-level series,
        and a level within ``min_gap`` of zero is idle (see module docstring).
    n_init : k-means restarts.
    trim : samples left out at each end of a burst run (runs longer than ``2 * trim``) when
        averaging the burst amount; 0 = plain mean over all burst samples.

    Attributes (after :meth:`fit`)
    ------------------------------
    labels_ : int array, 1 = burst, 0 = idle, per sample.
    centers_ : (idle centre, burst centre).
    threshold_ : values above it are burst (midpoint of the centres; -inf / +inf when the
        series is all burst / all idle).
    burst_amount_ : time-weighted mean of burst samples (units of the values).
    burst_duration_, idle_duration_ : mean run lengths (s).
    shares_ : {"I", "BIB", "B"} fractions of time.
    runs_ : DataFrame of runs: label, start (sample index), n (samples), duration (s), edge.
    window_ : total time covered (s). degenerate_ : True for a one-level series.
    """

    def __init__(self, random_state: int | None = 0, min_gap: float = 0.0, n_init: int = 10, trim: int = 1) -> None:
        self.random_state = random_state
        self.min_gap = min_gap
        self.n_init = n_init
        self.trim = trim

    def __repr__(self) -> str:
        return (
            f"BurstIdleLabeller(random_state={self.random_state!r}, min_gap={self.min_gap!r}, "
            f"n_init={self.n_init!r}, trim={self.trim!r})"
        )

    def fit(self, values, dt) -> "BurstIdleLabeller":
        """Label ``values`` (1-d); ``dt`` is the sampling period (s) or one duration per sample."""
        x = np.asarray(values, dtype=np.float64).ravel()
        n = len(x)
        if n == 0:
            raise DripleError("cannot label an empty series: the window holds no samples")
        if not np.all(np.isfinite(x)):
            raise DripleError("cannot label a series with NaN or infinite values; drop them first")
        if np.ndim(dt) == 0:
            w = np.full(n, float(dt))
        else:
            w = np.asarray(dt, dtype=np.float64).ravel()
        if len(w) != n:
            raise DripleError(f"dt has {len(w)} entries for {n} samples")
        if not np.all(w > 0):
            raise DripleError("sample durations dt must be positive")
        self.window_ = float(np.cumsum(w)[-1])  # the same sum as the run durations below
        gap = float(self.min_gap)

        labels = None
        if n >= 2 and x.max() - x.min() > gap and np.unique(x).size >= 2:
            from sklearn.cluster import KMeans
            from threadpoolctl import threadpool_limits

            km = KMeans(n_clusters=2, n_init=self.n_init, random_state=self.random_state)
            # one thread: on a busy host OpenMP threads spin-wait and make a 40 ms fit take seconds
            with warnings.catch_warnings(), threadpool_limits(1):
                warnings.simplefilter("ignore")
                km.fit(x[:, None], sample_weight=w)
            centres = km.cluster_centers_.ravel()
            hi = int(np.argmax(centres))
            lo_c, hi_c = float(centres[1 - hi]), float(centres[hi])
            if hi_c - lo_c > gap and lo_c != hi_c:
                labels = (km.labels_ == hi).astype(np.int64)
                self.centers_ = (lo_c, hi_c)
                self.threshold_ = (lo_c + hi_c) / 2
        self.degenerate_ = labels is None or labels.min() == labels.max()
        if self.degenerate_:
            level = float(np.average(x, weights=w))
            burst = abs(level) > gap
            labels = np.full(n, 1 if burst else 0, dtype=np.int64)
            self.centers_ = (level, level)
            self.threshold_ = float("-inf") if burst else float("inf")
        self.labels_ = labels
        self._summarise(x, w)
        return self

    def _summarise(self, x: np.ndarray, w: np.ndarray) -> None:
        labels = self.labels_
        n = len(labels)
        starts = np.flatnonzero(np.diff(labels, prepend=labels[0] - 1) != 0)
        lengths = np.diff(np.append(starts, n))
        kinds = labels[starts]
        cum = np.concatenate([[0.0], np.cumsum(w)])
        durations = cum[starts + lengths] - cum[starts]
        edge = (starts == 0) | (starts + lengths == n)
        self.runs_ = pd.DataFrame(
            {"label": kinds, "start": starts, "n": lengths, "duration": durations, "edge": edge}
        )

        burst = labels == 1
        core = burst.copy()  # burst samples used for the amount: runs trimmed at both ends
        trim = int(self.trim)
        if trim > 0:
            for s, ln in zip(starts[kinds == 1], lengths[kinds == 1]):
                if ln > 2 * trim:
                    core[s : s + trim] = False
                    core[s + ln - trim : s + ln] = False
        if core.any():
            self.burst_amount_ = float(np.average(x[core], weights=w[core]))
        else:
            self.burst_amount_ = float(np.average(x, weights=w))
        self.burst_duration_ = self._mean_run(kinds == 1, edge, durations)
        self.idle_duration_ = self._mean_run(kinds == 0, edge, durations)

        # BIB idle: idle runs with a burst on both sides; bursts next to one are BIB too.
        k = len(kinds)
        bib = np.zeros(k, dtype=bool)
        for i in range(1, k - 1):
            if kinds[i] == 0:  # neighbours of an idle run are bursts (runs alternate)
                bib[i - 1 : i + 2] = True
        time_of = lambda mask: float(durations[mask].sum()) / self.window_  # noqa: E731
        self.shares_ = {
            "I": time_of((kinds == 0) & ~bib),
            "BIB": time_of(bib),
            "B": time_of((kinds == 1) & ~bib),
        }

    @staticmethod
    def _mean_run(kind: np.ndarray, edge: np.ndarray, durations: np.ndarray) -> float:
        inner = kind & ~edge
        if inner.any():
            return float(durations[inner].mean())
        if kind.any():
            return float(durations[kind].mean())
        return 0.0


def sample_durations(index: np.ndarray) -> np.ndarray:
    """Duration (s) of each row: the gap to the previous row (the first gets the median gap)."""
    t = np.asarray(index, dtype=np.float64)
    if len(t) < 2:
        return np.full(len(t), float(t[0]) if len(t) and t[0] > 0 else 1.0)
    d = np.diff(t)
    return np.concatenate([[np.median(d)], d])


def label_rates(
    df: pd.DataFrame,
    t0: float | None = None,
    t1: float | None = None,
    *,
    min_gap: dict | None = None,
    random_state: int | None = 0,
) -> dict:
    """The 12 burst/idle metrics (``driple.metrics.METRICS``; no step time) plus ``<res>_share_{I,BIB,B}`` of one worker.

    ``df`` is :meth:`RawSeries.rates` output (index t in s, columns compute, memory, tx, rx);
    only rows with ``t0 <= t <= t1`` are used (the steady-state window). NaN rows of a
    resource (e.g. before the first GPU driver sample) are dropped for that resource.
    """
    names = [r.name for r in resources()]
    missing = [r for r in names if r not in df.columns]
    if missing:
        raise DripleError(f"rates table lacks column(s) {missing}; expected {names}")
    # two k-means centres closer than a resource's min_gap are one level (driple.metrics)
    gaps = {**{r.name: r.min_gap for r in resources()}, **(min_gap or {})}
    t = df.index.to_numpy(dtype=np.float64)
    dt = sample_durations(t)
    keep = np.ones(len(t), dtype=bool)
    if t0 is not None:
        keep &= t >= t0
    if t1 is not None:
        keep &= t <= t1
    if keep.sum() < 2:
        raise DripleError(
            f"only {int(keep.sum())} sample(s) between t0={t0} and t1={t1} s: the window is too "
            "short or outside the run (was the job shorter than its warm-up?)"
        )
    out: dict = {}
    shares: dict = {}
    for res in names:
        v = df[res].to_numpy(dtype=np.float64)[keep]
        d = dt[keep]
        ok = np.isfinite(v)
        if ok.sum() == 0:
            raise DripleError(f"no valid {res} samples in the window")
        lab = BurstIdleLabeller(random_state=random_state, min_gap=gaps[res]).fit(v[ok], d[ok])
        out[f"{res}_burst_amount"] = lab.burst_amount_
        out[f"{res}_burst_duration"] = lab.burst_duration_
        out[f"{res}_idle_duration"] = lab.idle_duration_
        for s in SHARES:
            shares[f"{res}_share_{s}"] = lab.shares_[s]
    return {**{t.name: out[t.name] for t in targets() if t.resource is not None}, **shares}
