"""Carry a prediction from the machine an inspector knows to another :class:`HardwareSpec`.

The inspector's roofline (:mod:`driple.inspector.roofline`) writes every duration as a sum of
terms, each a fitted fraction of a peak of the spec: per op class FLOPs over the float32 matmul
rate and bytes over the copy bandwidth, communicated bytes over the link rate, plus a per-op
overhead. With the fractions kept and the peaks of another spec put in, the roofline gives the
durations on that machine; a prediction is carried over by the ratio of the two:

    duration on B = predicted duration on A x roofline(B) / roofline(A)

per target and job. Amounts (% of a core, MB, MB/s) are left as they are; the step time is a
duration and follows. The fractions are those of machine A: where a machine runs an op class
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


def carry(values: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """``values`` ``[n, targets]`` times ``ratio`` (a prediction carried to other hardware)."""
    return np.asarray(values, dtype=np.float64) * ratio
