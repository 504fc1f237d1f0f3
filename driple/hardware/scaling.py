"""Carry a prediction from the machine an inspector knows to another :class:`HardwareSpec`.

The inspector's roofline (:mod:`driple.inspector.roofline`) writes every duration as a sum of
terms, each a fitted fraction of a peak of the spec: per op class FLOPs over the float32 matmul
rate and bytes over the copy bandwidth, communicated bytes over the link rate, plus a per-op
overhead. With the fractions kept and the peaks of another spec put in, the roofline gives the
durations on that machine; a prediction is carried over by the ratio of the two:

    duration on B = predicted duration on A x roofline(B) / roofline(A)

per target and job; the step time is a duration and follows. Amounts follow what the machine
changes: a worker's compute (% of a core) is capped by its share of the usable cores, so it
scales with that share; a network amount is bytes over a burst's duration, and the bytes of a
step stay, so it scales inversely with that burst's duration; memory stays. The fractions are those of machine A: where a machine runs an op class
at another fraction of its peak (one-thread 512^2 matmul peaks differ 2.1x between this
project's Intel and AMD hosts while their training steps differ ~1.2x), the carried prediction
is off by that difference; the evaluation measures it (``driple hardware evaluate``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from driple.errors import DripleError


def roofline_ratio(roofline, graphs: Sequence, source, target) -> np.ndarray:
    """``[n, targets]``: roofline(target) / roofline(source) per job and duration target (1 for
    the other targets and where the source's roofline is 0). ``roofline`` is a fitted
    :class:`~driple.inspector.roofline.RooflineMember`; ``source``/``target`` are
    :class:`~driple.hardware.host_speed.HostSpeed` figures (``HardwareSpec.host_speed()``)."""
    if roofline is None:
        raise DripleError("this inspector has no roofline, so it cannot carry a prediction to other hardware")
    on_source = _member_on(roofline, source).predict(graphs)
    on_target = _member_on(roofline, target).predict(graphs)
    ratio = np.ones_like(on_source)
    ok = np.isfinite(on_source) & np.isfinite(on_target) & (on_source > 0)
    ratio[ok] = on_target[ok] / on_source[ok]
    return ratio


def _member_on(roofline, host):
    """The same fitted fractions with another spec's peaks."""
    return type(roofline)(roofline.targets, roofline.setting, host, roofline.weights, roofline.modes,
                          roofline.overlap, roofline.terms)


def peaks(source, target, ranks: int) -> tuple:
    """``(source, target)`` :class:`~driple.hardware.host_speed.HostSpeed` peaks of two specs
    for a job of ``ranks`` one-thread processes on one machine: each rank's share of the usable
    cores counts when both specs know their cores (a cgroup quota of 1 core halves each of two
    ranks' peaks), and on neither side otherwise."""
    n = ranks if _both_know_cores(source, target) else None
    return source.host_speed(n), target.host_speed(n)


def core_ratio(source, target, ranks: int) -> float:
    """Each rank's share of the usable cores on ``target`` over that on ``source`` (1 unless
    both specs know their cores)."""
    if _both_know_cores(source, target):
        return target.core_share(ranks) / source.core_share(ranks)
    return 1.0


def _both_know_cores(source, target) -> bool:
    return source.cores_available > 0 and target.cores_available > 0


def carry(values: np.ndarray, ratio: np.ndarray, targets=None, device: str = "cpu",
          cores: float = 1.0) -> np.ndarray:
    """``values`` ``[n, targets]`` carried to other hardware: durations times ``ratio``; with
    ``targets`` (their names) also the amounts (module docstring): a CPU compute amount times
    ``cores`` (:func:`core_ratio`), a byte rate divided by its burst duration's ratio."""
    from driple.metrics import resources

    values = np.asarray(values, dtype=np.float64)
    out = values * ratio
    if targets is None:
        return out
    targets = list(targets)
    for r in resources():
        amount, duration = f"{r.name}_burst_amount", f"{r.name}_burst_duration"
        if amount not in targets:
            continue
        kind = (r.rate.get(device) or (None,))[0]
        j = targets.index(amount)
        if kind == "cpu_time":
            out[:, j] = values[:, j] * cores
        elif kind == "bytes" and duration in targets:
            out[:, j] = values[:, j] / ratio[:, targets.index(duration)]
    return out
