"""Keep predictions inside what a worker can physically do, and say when the inspector extrapolates.

A regression head has no notion of physics: trained on CIFAR-sized jobs it can predict a CPU
worker in burst at 141 % of a core, or a link carrying more than its rate. :func:`bound` clips
the *amounts* to hard caps and flags every metric that lies outside the range of the jobs the
inspector was trained on, so that a scheduler knows which numbers are extrapolations.

Caps (upper bounds of the burst amounts, declared per resource in :mod:`driple.metrics`; the
lower bound of every target is 0):

- compute: on a CPU host, the most any training job of the setting reached (the label's
  training maximum, e.g. 116 % of a core: a worker's process tree counts its gloo threads too);
  on a GPU host, 100 % utilisation;
- memory: 100 % (of host memory, or memory-controller utilisation on a GPU) in labels v1; the
  host's memory in MB (from the host figures the inspector was trained with) in labels v2;
- TX / RX: the setting's link rate in MB/s (emulated links), none on loopback.

Durations are not capped: a larger model legitimately has longer phases than any training job;
they are flagged when outside the training range, and raised to the shortest training value
when below it (no measured burst or idle was shorter: at 100 Hz one sample lasts 10 ms).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.metrics import HOST_MEMORY, LINK_RATE, TRAINING_MAX, resources, targets
from driple.predict.formatting import format_number


def caps(setting: str, high: Optional[Sequence[float]] = None,
         host_memory_mb: Optional[float] = None) -> dict:
    """``{target: upper bound}`` of the burst amounts in ``setting`` (see the module docstring).

    ``high``: the training maximum of each target (``TargetScaler.high_``), or None;
    ``host_memory_mb``: memory of the host the inspector was trained for (MB), or None."""
    return {m: cap for m, (cap, _why) in _caps(setting, high, host_memory_mb).items()}


def _caps(setting: str, high, host_memory_mb: Optional[float] = None) -> dict:
    """``{target: (upper bound, why)}``: each resource's declared cap (:mod:`driple.metrics`)
    in this setting, and the words that explain it."""
    from driple.settings import parse_setting

    s = parse_setting(setting)
    names = [t.name for t in targets()]
    out = {}
    for r in resources():
        cap, m = r.cap.get(s.device), f"{r.name}_burst_amount"
        if cap == TRAINING_MAX:
            j = names.index(m)
            if high is not None and np.isfinite(high[j]):
                out[m] = (float(high[j]), f"the most any training job's worker reached in {setting}")
        elif cap == LINK_RATE:
            if s.link_bps:
                out[m] = (s.link_bps / 8e6, f"the link rate of {setting}")
        elif cap == HOST_MEMORY:
            if host_memory_mb:
                out[m] = (float(host_memory_mb), f"all of the memory of the host of {setting}")
        elif cap is not None:
            out[m] = (float(cap), r.cap_reason)
    return out


def floors(low: Optional[Sequence[float]] = None) -> dict:
    """``{target: lower bound}`` of the targets raised to their training minimum (the durations:
    the shortest one among the training jobs; ``low``: ``TargetScaler.low_``). A prediction
    below it is raised to it, and no interval reaches below it."""
    if low is None:
        return {}
    return {t.name: float(low[j]) for j, t in enumerate(targets())
            if t.raise_to_training_min and np.isfinite(low[j])}


EXTRAPOLATED, CLIPPED, RAISED, SCALED = ("extrapolated", "clipped", "raised to the training minimum",
                                         "scaled to the step time")


def bound(values: np.ndarray, setting: Optional[str], low=None, high=None,
          host_memory_mb: Optional[float] = None, flags: Optional[list] = None) -> tuple[np.ndarray, list]:
    """Clip ``values`` (``[n, targets]``, declared order) to ``[0, cap]``; return them with one
    list of plain-text notes per row (what was clipped, what lies outside the training range).
    ``host_memory_mb``: the cap of a memory amount in MB (labels v2). ``flags``: a list to fill
    with one ``{target: [flag, ...]}`` per row (:data:`EXTRAPOLATED`, :data:`CLIPPED`,
    :data:`RAISED`), what a profile's JSON says per target."""
    values = np.array(values, dtype=np.float64, copy=True)
    notes: list[list[str]] = [[] for _ in range(len(values))]
    marks: list[dict] = [{} for _ in range(len(values))]
    if flags is not None:
        flags[:] = marks
    upper = _caps(setting, high, host_memory_mb) if setting else {}
    declared = targets()
    known = [low is not None and high is not None and np.isfinite(low[j]) and np.isfinite(high[j])
             for j in range(len(declared))]
    for i, row in enumerate(values):
        for j, t in enumerate(declared):
            m, v = t.name, row[j]
            floor = known[j] and t.raise_to_training_min and v < low[j]
            if known[j] and (v > high[j] * 1.05 or v < low[j] * 0.95):
                shown = f" (shown as {format_number(low[j])})" if floor else (" (shown as 0)" if v < 0 else "")
                notes[i].append(f"{m} {format_number(v)}{shown} lies outside the training jobs' range "
                                f"[{format_number(low[j])}, {format_number(high[j])}]: an extrapolation")
                marks[i].setdefault(m, []).append(EXTRAPOLATED)
            if m in upper and v > upper[m][0]:
                notes[i].append(f"{m} {format_number(v)} clipped to {format_number(upper[m][0])}: {upper[m][1]}")
                row[j] = upper[m][0]
                marks[i].setdefault(m, []).append(CLIPPED)
            if floor:
                row[j] = low[j]  # no measured phase was shorter (one sample is 10 ms at 100 Hz)
                marks[i].setdefault(m, []).append(RAISED)
        np.clip(row, 0.0, None, out=row)
    return values, notes


def hold_together(values: np.ndarray, notes: list, flags: list, tolerance: float = 0.02) -> np.ndarray:
    """Each resource's burst and idle durations scaled down together where their cycle is longer
    than the step time: the labels are per iteration (a mean burst and a mean gap within one
    step), so a cycle cannot last longer than a step. Durations raised to the training minimum
    are what makes a short job's cycle too long; the step time, a whole-iteration figure, is
    the one kept. Says so in ``notes`` and ``flags`` (:data:`SCALED`)."""
    from driple.metrics import STEP_TIME, resource_names

    names = [t.name for t in targets()]
    if STEP_TIME.name not in names:
        return values
    s = names.index(STEP_TIME.name)
    values = np.array(values, dtype=np.float64, copy=True)
    for i, row in enumerate(values):
        step = row[s]
        if not np.isfinite(step) or step <= 0:
            continue
        for r in resource_names():
            b, d = names.index(f"{r}_burst_duration"), names.index(f"{r}_idle_duration")
            cycle = row[b] + row[d]
            if cycle > step * (1 + tolerance):
                factor = step / cycle
                notes[i].append(f"{r} burst and idle ({format_number(cycle)} s a cycle) scaled by "
                                f"{factor:.2f} to the {format_number(step)} s step: one cycle lasts a step at most")
                row[b] *= factor
                row[d] *= factor
                for m in (names[b], names[d]):
                    flags[i].setdefault(m, []).append(SCALED)
    return values
