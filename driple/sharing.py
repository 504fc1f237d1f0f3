"""Jobs sharing a resource: the arithmetic both predictions (:mod:`driple.predict.colocate`) and
measured co-runs (:mod:`driple.collect.corun`) use.

A job is in burst on a resource a share ``d`` of the time (its duty cycle); jobs whose phases
are independent and uniformly random are in burst at a random instant independently of each
other. Capacities are ``{resource: capacity}`` in the resources' units (:mod:`driple.metrics`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from driple.errors import DripleError


@dataclass(kw_only=True)
class SharedLoad:
    """One resource shared by jobs, amounts in the resource's unit: what a prediction
    (:class:`driple.predict.colocate.ResourceLoad`) and a measurement
    (:class:`driple.collect.corun.MeasuredLoad`) both say.

    ``combined_mean``: the sum of the jobs' mean loads; ``duty_cycles`` / ``mean_loads``: per
    job; ``utilisation`` = combined mean / ``capacity`` (both None without a capacity).
    """

    resource: str
    unit: str
    combined_mean: float
    duty_cycles: dict
    mean_loads: dict
    capacity: Optional[float] = None
    utilisation: Optional[float] = None

    def to_dict(self) -> dict:
        return asdict(self)


def collision_probability(duty_cycles: Sequence[float]) -> float:
    """P(two or more in burst) for independent jobs in burst with probabilities ``duty_cycles``:
    ``1 - prod(1 - d_i) - sum_i d_i prod_{j != i} (1 - d_j)``."""
    # accumulated job by job as P(none), P(exactly one), P(two or more): the same number without
    # the cancellation of 1 - ... (one job gives exactly 0, not 1e-17)
    none, one, many = 1.0, 0.0, 0.0
    for d in np.clip(np.asarray(duty_cycles, dtype=np.float64).ravel(), 0.0, 1.0):
        none, one, many = none * (1 - d), one * (1 - d) + none * d, many + one * d
    return float(many)


def overload_level(capacity: float) -> float:
    """Demand above this overloads ``capacity``: demand equal to it (up to rounding) does not."""
    return float(capacity) + 1e-9 * max(1.0, abs(float(capacity)))


def check_capacity(capacity: Mapping) -> dict:
    """``{resource: capacity}`` checked (known resources, positive numbers; None left out), in
    the order of the declared resources."""
    from driple.metrics import resource_names

    names = resource_names()
    if not isinstance(capacity, Mapping):
        raise DripleError("capacity must be a {resource: capacity} dict, e.g. host_capacity(cores=2, link_mb_s=125)")
    bad = [r for r in capacity if r not in names]
    if bad:
        raise DripleError(f"capacity for unknown resource(s) {bad}; use {list(names)}")
    out = {}
    for r in names:
        if r in capacity and capacity[r] is not None:
            c = float(capacity[r])
            if not (np.isfinite(c) and c > 0):
                raise DripleError(f"capacity of {r} must be a positive number, got {capacity[r]!r}")
            out[r] = c
    return out
