"""Labels v2: burst/idle per steady-state iteration from the ranks' timelines.

Per rank and measured iteration *i* (span ``[start_i, start_{i+1})``, the last one
``[start, end]``; its length is the iteration period ``p_i``):

- **runs**: compute runs = union of compute intervals; tx / rx runs = union of the intervals in
  which data is in flight (:func:`comm_runs`); gaps shorter than ``merge_gap`` (1 ms) merged.
- **burst duration** = time covered by runs in the iteration; **idle duration** = ``p_i`` minus
  it. Totals per iteration, not mean run lengths: a mean run length flips when two runs merge
  or split (1 <-> 2 runs per step doubles it), a total does not. The number of runs per
  iteration is reported beside (``<res>_bursts_per_iter``) and the mean-run definition is kept
  in the per-rank detail (``runmean_*``) for comparison.
- **memory**: allocated bytes (piecewise constant between samples); burst = time above the
  midpoint of the iteration's low and peak; amount = the peak (MB).
- **amounts** of compute, tx, rx come from the sampled counters: the mean CPU % (GPU util) of
  the rank over its compute runs; bytes counted in the window over the time covered by tx / rx
  runs (MB/s).
- **step time** = median ``p_i``.

Each label is the median over iterations (its interquartile range is kept: the label's own
spread), then the mean over workers (servers are labelled apart). Units: s, MB, MB/s, % of
the rank's allotted cores.

Network runs (:func:`comm_runs`): a collective moves data only while every rank is in it, so
with a shared clock (one host, or namespaces on one host) a collective's run is its *joint*
interval, from the last rank joining to the first one leaving: both workers get the same
runs. A parameter-server push is in flight from the worker's send until the server has it
(tx), the answer from the server's release until the worker has it (rx). Without a shared
clock (separate hosts) each rank's own intervals are used.
"""
from __future__ import annotations

import numpy as np

from driple.collect.timeline.record import COMM_KINDS, RankTimeline
from driple.errors import DripleError

MERGE_GAP_NS = 1_000_000  # gaps shorter than 1 ms between runs are merged
MIN_ITERATIONS = 20  # measured iterations a worker needs for labels
RESOURCES = ("compute", "memory", "tx", "rx")


# ------------------------------------------------------------------ interval arithmetic
def union(intervals, merge_gap: int = 0) -> np.ndarray:
    """Sorted disjoint ``[m, 2]`` runs covering ``intervals`` (``[n, 2]``); runs separated by
    less than ``merge_gap`` are merged; empty intervals are dropped."""
    iv = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
    iv = iv[iv[:, 1] > iv[:, 0]]
    if len(iv) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    out = []
    start, end = int(iv[0, 0]), int(iv[0, 1])
    for s, e in iv[1:]:
        if s - end < merge_gap or s <= end:
            end = max(end, int(e))
        else:
            out.append((start, end))
            start, end = int(s), int(e)
    out.append((start, end))
    return np.array(out, dtype=np.int64)


def covered(runs: np.ndarray, at) -> np.ndarray:
    """Time covered by ``runs`` (sorted, disjoint) before each instant of ``at``."""
    at = np.asarray(at, dtype=np.int64)
    if len(runs) == 0:
        return np.zeros(at.shape, dtype=np.int64)
    lengths = runs[:, 1] - runs[:, 0]
    before = np.concatenate([[0], np.cumsum(lengths)])
    k = np.searchsorted(runs[:, 0], at, side="right") - 1  # last run starting at or before t
    inside = np.clip(at - runs[np.maximum(k, 0), 0], 0, lengths[np.maximum(k, 0)])
    return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)


def iteration_spans(iters: np.ndarray) -> np.ndarray:
    """``[n, 2]`` spans of iterations: from one start to the next; the last to its end."""
    iters = np.asarray(iters, dtype=np.int64).reshape(-1, 2)
    if len(iters) == 0:
        return iters
    ends = np.append(iters[1:, 0], iters[-1, 1])
    return np.stack([iters[:, 0], ends], axis=1)


def busy_per_span(runs: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(busy ns, runs touching)`` of each span."""
    busy = covered(runs, spans[:, 1]) - covered(runs, spans[:, 0])
    if len(runs) == 0:
        return busy, np.zeros(len(spans), dtype=np.int64)
    starting_before_end = np.searchsorted(runs[:, 0], spans[:, 1], side="left")
    ended_before_start = np.searchsorted(runs[:, 1], spans[:, 0], side="right")
    return busy, starting_before_end - ended_before_start


def span_curves(mem: np.ndarray, spans: np.ndarray):
    """``(i, times, values)`` of the step curve ``mem`` (rows ``t, bytes``; a value holds until
    the next sample) on each span ``i`` that has samples: ``times`` has one more entry than
    ``values`` (the span's end). Before a first sample inside a span the curve is unknown."""
    if len(mem) == 0:
        return
    mem = mem[np.argsort(mem[:, 0], kind="stable")]
    t, v = mem[:, 0], mem[:, 1].astype(np.float64)
    for i, (lo, hi) in enumerate(spans):
        a = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)  # the sample in force at lo
        b = int(np.searchsorted(t, hi, side="left"))
        if b <= a or t[a] >= hi:
            continue
        yield i, np.concatenate([[max(t[a], lo)], t[a + 1:b], [hi]]), v[a:b]


def memory_per_span(mem: np.ndarray, spans: np.ndarray):
    """``(peak bytes, low bytes, ns above the midpoint)`` of each span of a step curve
    (``mem`` rows ``t, bytes``; the value holds until the next sample); NaN without samples."""
    n = len(spans)
    peak, low, above = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for i, times, vals in span_curves(mem, spans):
        dur = np.diff(times).astype(np.float64)
        peak[i], low[i] = vals.max(), vals.min()
        mid = (peak[i] + low[i]) / 2
        above[i] = float(dur[vals > mid].sum()) if peak[i] > low[i] else 0.0
    return peak, low, above


def memory_burst_runs(mem: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """``[m, 2]`` intervals in which allocated bytes are above their iteration's midpoint (the
    memory bursts that :func:`memory_per_span` times), for drawing."""
    out = []
    for _, times, vals in span_curves(mem, spans):
        mid = (vals.max() + vals.min()) / 2
        if vals.max() > vals.min():
            out += [(times[k], times[k + 1]) for k in np.flatnonzero(vals > mid)]
    return union(np.array(out, dtype=np.int64).reshape(-1, 2))


def mean_over_runs(runs: np.ndarray, t_end_ns: np.ndarray, values: np.ndarray) -> float:
    """Time-weighted mean of a sampled rate over ``runs``: sample *k* holds the mean over
    ``(t_{k-1}, t_k]``; each counts with its overlap with the runs. NaN without overlap."""
    t_end_ns = np.asarray(t_end_ns, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if len(t_end_ns) < 2 or len(runs) == 0:
        return float("nan")
    t_start = np.concatenate([[t_end_ns[0] - int(np.median(np.diff(t_end_ns)))], t_end_ns[:-1]])
    overlap = (covered(runs, t_end_ns) - covered(runs, t_start)).astype(np.float64)
    ok = np.isfinite(values) & (overlap > 0)
    if not ok.any():
        return float("nan")
    return float(np.sum(values[ok] * overlap[ok]) / np.sum(overlap[ok]))


def _stats(values) -> tuple[float, float]:
    """Median and interquartile range (NaNs ignored)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return float("nan"), float("nan")
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return float(med), float(q3 - q1)


def _mean_inner_run(runs: np.ndarray, lo: int, hi: int) -> tuple[float, float]:
    """Mean length (s) of runs and of the gaps between them that lie wholly inside [lo, hi]."""
    inner = runs[(runs[:, 0] > lo) & (runs[:, 1] < hi)] if len(runs) else runs
    run_mean = float((inner[:, 1] - inner[:, 0]).mean()) / 1e9 if len(inner) else float("nan")
    gaps = inner[1:, 0] - inner[:-1, 1] if len(inner) > 1 else np.zeros(0)
    gap_mean = float(gaps.mean()) / 1e9 if len(gaps) else float("nan")
    return run_mean, gap_mean


# ------------------------------------------------------------------ network runs
def comm_runs(timelines: dict[str, RankTimeline], shared_clock: bool = True) -> dict[str, dict]:
    """``{rank: {"tx": intervals, "rx": intervals}}``: when each rank's data is in flight (ns).

    Collectives (``peer == -1``) are matched across ranks by (iteration, kind, order within the
    iteration) and reduced to their joint interval when ``shared_clock``; PS push-pulls are
    split at the server's entry and release times (see module docstring)."""
    out = {name: {"tx": [], "rx": []} for name in timelines}
    keyed: dict[tuple, dict[str, tuple[int, int]]] = {}
    servers = {name: tl for name, tl in timelines.items() if tl.meta.get("role") == "server"}
    serve_index = {}
    for sname, stl in servers.items():
        sidx = int(sname.removeprefix("server"))
        for w, seq, entry, release in stl.serve:
            serve_index[(sidx, int(w), int(seq))] = (int(entry), int(release))
    for name, tl in timelines.items():
        order: dict[tuple, int] = {}
        for it, peer, kind, start, end, _tx, _rx in tl.comm:
            if peer == -1:
                k = (int(it), int(kind))
                n = order.get(k, 0)
                order[k] = n + 1
                keyed.setdefault((*k, n), {})[name] = (int(start), int(end))
            elif kind == COMM_KINDS["pushpull"]:
                widx = int(name.removeprefix("worker")) if name.startswith("worker") else -1
                hit = serve_index.get((int(peer), widx, int(it))) if shared_clock else None
                if hit is None:
                    out[name]["tx"].append((start, end))
                    out[name]["rx"].append((start, end))
                    continue
                entry, release = hit
                out[name]["tx"].append((start, entry))
                out[name]["rx"].append((release, end))
                sname = f"server{int(peer)}"
                if sname in out:
                    out[sname]["rx"].append((start, entry))
                    out[sname]["tx"].append((release, end))
    for ranks in keyed.values():
        if shared_clock and len(ranks) > 1:
            s = max(v[0] for v in ranks.values())
            e = min(v[1] for v in ranks.values())
            for name in ranks:
                out[name]["tx"].append((s, e))
                out[name]["rx"].append((s, e))
        else:
            for name, (s, e) in ranks.items():
                out[name]["tx"].append((s, e))
                out[name]["rx"].append((s, e))
    return {name: {d: np.array(v, dtype=np.int64).reshape(-1, 2) for d, v in dirs.items()}
            for name, dirs in out.items()}


# ------------------------------------------------------------------ one rank
def label_rank(tl: RankTimeline, net: dict, rates=None, series_start_ns: int | None = None,
               window_bytes: tuple[float, float] | None = None, merge_gap: int = MERGE_GAP_NS,
               min_iterations: int = MIN_ITERATIONS) -> dict:
    """Labels of one rank (module docstring): the 12 burst/idle metrics, ``step_time``, spreads, extras.

    ``net`` is this rank's :func:`comm_runs` entry. ``rates`` (optional) is the sampler's
    :meth:`~driple.collect.series.RawSeries.rates` table of the rank (index s since
    ``series_start_ns``) for the compute amount; ``window_bytes`` the (tx, rx) bytes the
    counters saw over the measured window, for the network amounts.
    """
    spans = iteration_spans(tl.measured)
    if len(spans) < min_iterations:
        raise DripleError(f"{tl.name} measured {len(spans)} iterations after warm-up; labels need "
                          f"at least {min_iterations} (raise the job's seconds or its time cap)")
    lo, hi = int(spans[0, 0]), int(spans[-1, 1])
    period = (spans[:, 1] - spans[:, 0]).astype(np.float64)
    out: dict = {"iterations": int(len(spans))}
    out["step_time"], out["step_time_iqr"] = (v / 1e9 for v in _stats(period))

    runs = {"compute": union(tl.compute, merge_gap),
            "tx": union(net.get("tx", np.zeros((0, 2))), merge_gap),
            "rx": union(net.get("rx", np.zeros((0, 2))), merge_gap)}
    for res, r in runs.items():
        busy, count = busy_per_span(r, spans)
        busy = busy.astype(np.float64)
        out[f"{res}_burst_duration"], out[f"{res}_burst_duration_iqr"] = (v / 1e9 for v in _stats(busy))
        out[f"{res}_idle_duration"], out[f"{res}_idle_duration_iqr"] = (v / 1e9 for v in _stats(period - busy))
        out[f"{res}_bursts_per_iter"] = _stats(count)[0]
        out[f"runmean_{res}_burst_duration"], out[f"runmean_{res}_idle_duration"] = _mean_inner_run(r, lo, hi)
        out[f"{res}_busy_s"] = float(covered(r, [hi])[0] - covered(r, [lo])[0]) / 1e9

    peak, low, above = memory_per_span(tl.mem, spans)
    out["memory_burst_amount"], out["memory_burst_amount_iqr"] = (v / 1e6 for v in _stats(peak))
    out["memory_low_mb"] = _stats(low)[0] / 1e6
    out["memory_burst_duration"], out["memory_burst_duration_iqr"] = (v / 1e9 for v in _stats(above))
    out["memory_idle_duration"], out["memory_idle_duration_iqr"] = (v / 1e9 for v in _stats(period - above))
    out["memory_bursts_per_iter"] = 1.0 if np.isfinite(out["memory_burst_duration"]) else float("nan")

    out["compute_burst_amount"] = float("nan")
    if rates is not None and series_start_ns is not None and len(rates):
        t_ns = np.round(rates.index.to_numpy(dtype=np.float64) * 1e9).astype(np.int64) + int(series_start_ns)
        out["compute_burst_amount"] = mean_over_runs(runs["compute"], t_ns, rates["compute"].to_numpy())
    for res, nbytes in zip(("tx", "rx"), window_bytes or (float("nan"), float("nan"))):
        busy_s = out[f"{res}_busy_s"]
        out[f"{res}_burst_amount"] = float(nbytes) / busy_s / 1e6 if busy_s > 0 else 0.0
    return out


def tail_fraction(timelines: dict[str, RankTimeline]) -> float:
    """The share of a step after its forward and backward pass, mean over the workers of the
    median over measured iterations: what follows the end of the iteration's longest compute
    interval (the forward and backward pass; the optimizer's update and the last communication
    come after), or of its last reduce-scatter where it has any (a sharded worker's pass is cut
    into pieces by its collectives and ends with its last unit's reduce-scatter). What
    :class:`driple.graph.memory_cycle.TailFit` is fitted to; NaN without compute intervals."""
    def share(tl, lo, hi):
        inside = tl.compute[(tl.compute[:, 0] >= lo) & (tl.compute[:, 0] < hi)]
        if not len(inside) or hi <= lo:
            return None
        end = int(inside[np.argmax(inside[:, 1] - inside[:, 0]), 1])
        scatters = tl.comm[(tl.comm[:, 2] == COMM_KINDS["reducescatter"]) & (tl.comm[:, 3] >= lo) & (tl.comm[:, 3] < hi)]
        if len(scatters):
            end = int(scatters[:, 4].max())
        return max(0.0, 1 - (min(end, int(hi)) - lo) / (hi - lo))

    return _worker_mean(timelines, share)


def comm_fraction(timelines: dict[str, RankTimeline]) -> float:
    """The share of a step a worker spends inside its blocking collectives (all-gathers and
    reduce-scatters: a sharded worker's training thread waits in them), mean over the workers
    of the median over measured iterations; 0 for a worker without any, NaN without
    iterations. What :class:`~driple.graph.memory_cycle.TailFit` places a sharded step's
    collectives in time with."""
    kinds = [COMM_KINDS["allgather"], COMM_KINDS["reducescatter"]]

    def share(tl, lo, hi):
        c = tl.comm[np.isin(tl.comm[:, 2], kinds) & (tl.comm[:, 3] >= lo) & (tl.comm[:, 3] < hi)]
        return float((np.minimum(c[:, 4], hi) - c[:, 3]).sum()) / (hi - lo) if hi > lo else None

    return _worker_mean(timelines, share)


def _worker_mean(timelines: dict[str, RankTimeline], share) -> float:
    """Mean over the worker ranks of the median over measured iterations of ``share(tl, lo, hi)``
    (None where an iteration has nothing to measure); NaN where no worker has a value."""
    per_rank = []
    for tl in timelines.values():
        if tl.meta.get("role", "worker") != "worker":
            continue
        shares = [v for lo, hi in iteration_spans(tl.measured) if (v := share(tl, int(lo), int(hi))) is not None]
        if shares:
            per_rank.append(float(np.median(shares)))
    return float(np.mean(per_rank)) if per_rank else float("nan")


# ------------------------------------------------------------------ a job
def mean_over_workers(per_rank: dict[str, dict], keys) -> dict:
    """Mean over the ``worker*`` ranks of each key (NaNs ignored)."""
    workers = [v for n, v in per_rank.items() if n.startswith("worker")]
    out = {}
    for k in keys:
        vals = np.array([w.get(k, np.nan) for w in workers], dtype=np.float64)
        out[k] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
    return out


def worker_agreement(per_rank: dict[str, dict], keys) -> dict:
    """Per key: largest relative difference between two workers, ``|a - b| / max(|a|, |b|)``."""
    workers = [v for n, v in per_rank.items() if n.startswith("worker")]
    out = {}
    for k in keys:
        vals = np.array([w.get(k, np.nan) for w in workers], dtype=np.float64)
        vals = vals[np.isfinite(vals)]
        if len(vals) < 2:
            continue
        top = np.max(np.abs(vals))
        out[k] = float((vals.max() - vals.min()) / top) if top > 0 else 0.0
    return out
