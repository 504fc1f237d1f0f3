"""Keep predictions inside what a worker can physically do, and say when the inspector extrapolates.

A regression head has no notion of physics: trained on CIFAR-sized jobs it can predict a CPU
worker in burst at 141 % of a core, or a link carrying more than its rate. :func:`bound` clips
the *amounts* to hard caps and flags every metric that lies outside the range of the jobs the
inspector was trained on, so that a scheduler knows which numbers are extrapolations.

Caps (upper bounds of the burst amounts; the lower bound of every metric is 0):

- compute: on a CPU host, the most any training job of the setting reached (the label's
  training maximum, e.g. 116 % of a core: a worker's process tree counts its gloo threads too);
  on a GPU host, 100 % utilisation;
- memory: 100 % (of host memory, or memory-controller utilisation on a GPU);
- TX / RX: the setting's link rate in MB/s (emulated links), none on loopback.

Durations are not capped: a larger model legitimately has longer phases than any training job;
they are flagged when outside the training range, and raised to the shortest training value
when below it (no measured burst or idle was shorter: at 100 Hz one sample lasts 10 ms).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.metrics import METRICS


def caps(setting: str, high: Optional[Sequence[float]] = None) -> dict:
    """``{metric: upper bound}`` of the burst amounts in ``setting`` (see the module docstring).

    ``high``: the training maximum of each metric (``TargetScaler.high_``), or None."""
    return {m: cap for m, (cap, _why) in _caps(setting, high).items()}


def _caps(setting: str, high) -> dict:
    """``{metric: (upper bound, why)}``: the caps and the words that explain them."""
    from driple.settings import parse_setting

    s = parse_setting(setting)
    out = {"memory_burst_amount": (100.0, "all of the memory")}
    j = METRICS.index("compute_burst_amount")
    if s.device == "gpu":
        out["compute_burst_amount"] = (100.0, "its physical bound")
    elif high is not None and np.isfinite(high[j]):
        out["compute_burst_amount"] = (float(high[j]),
                                       f"the most any training job's worker reached in {setting}")
    if s.link_bps:
        link = (s.link_bps / 8e6, f"the link rate of {setting}")
        out["tx_burst_amount"] = out["rx_burst_amount"] = link
    return out


def floors(low: Optional[Sequence[float]] = None) -> dict:
    """``{metric: lower bound}`` of the durations: the shortest one among the training jobs
    (``low``: ``TargetScaler.low_``). A prediction below it is raised to it, and no interval
    reaches below it."""
    if low is None:
        return {}
    return {m: float(low[j]) for j, m in enumerate(METRICS)
            if m.endswith("_duration") and np.isfinite(low[j])}


def bound(values: np.ndarray, setting: Optional[str], low=None, high=None) -> tuple[np.ndarray, list]:
    """Clip ``values`` (``[n, 12]``, METRICS order) to ``[0, cap]``; return them with one list
    of plain-text notes per row (what was clipped, what lies outside the training range)."""
    values = np.array(values, dtype=np.float64, copy=True)
    notes: list[list[str]] = [[] for _ in range(len(values))]
    upper = _caps(setting, high) if setting else {}
    lower = floors(low)
    known = [low is not None and high is not None and np.isfinite(low[j]) and np.isfinite(high[j])
             for j in range(len(METRICS))]
    for i, row in enumerate(values):
        for j, m in enumerate(METRICS):
            v = row[j]
            floor = known[j] and m in lower and v < lower[m]
            if known[j] and (v > high[j] * 1.05 or v < low[j] * 0.95):
                shown = f" (shown as {_num(low[j])})" if floor else (" (shown as 0)" if v < 0 else "")
                notes[i].append(f"{m} {_num(v)}{shown} lies outside the training jobs' range "
                                f"[{_num(low[j])}, {_num(high[j])}]: an extrapolation")
            if m in upper and v > upper[m][0]:
                notes[i].append(f"{m} {_num(v)} clipped to {_num(upper[m][0])}: {upper[m][1]}")
                row[j] = upper[m][0]
            if floor:
                row[j] = low[j]  # no measured phase was shorter (one sample is 10 ms at 100 Hz)
        np.clip(row, 0.0, None, out=row)
    return values, notes


def _num(v: float) -> str:
    return f"{v:.3g}"
