"""The memory simulator as an estimator: the peak a worker's allocator holds, from the trace.

It predicts ``memory_burst_amount`` (MB) only (NaN for the other targets): the simulated peak at
the points the collector samples (:func:`driple.graph.memory.simulate`, ``sampled=True``), plus
the runtime's own heap and the allocator's share, one offset and one scale fitted on the
training jobs' relative error. Nothing else is learned, so a family it never saw is predicted
as well as one it did.
"""
from __future__ import annotations

import json
from typing import Optional, Sequence

import numpy as np

from driple.inspector.estimators import Estimator, positions

TARGET = "memory_burst_amount"


def simulated_peak(row: dict, cache: dict) -> float:
    """The simulated peak (MB, at the collector's sample points) of a results row's job; NaN when
    it cannot be traced. ``cache`` keeps one answer per job configuration."""
    from driple.errors import DripleError
    from driple.graph.memory import simulate_job
    from driple.inspector.dataset import job_config
    from driple.settings import parse_setting

    c = job_config(row)
    key = json.dumps(c, sort_keys=True)
    if key not in cache:
        try:
            setting = parse_setting(c["setting"])
            cache[key] = simulate_job(c["model"], c["batch_size"], c["optimizer"], setting.strategy,
                                      sampled=True, workers=setting.workers, **c["knobs"]).peak_mb
        except DripleError:
            cache[key] = float("nan")
    return cache[key]


class MemoryEstimator(Estimator):
    name = "memory-sim"

    def __init__(self):
        self.offset_mb, self.scale = 0.0, 1.0
        self._peaks: dict = {}

    def _simulated(self, dataset, idx: Sequence[int]) -> np.ndarray:
        rows = dataset.frame.to_dict("records")
        return np.array([simulated_peak(rows[i], self._peaks) for i in idx], dtype=np.float64)

    def fit(self, dataset, train, val) -> "MemoryEstimator":
        from driple.graph.memory import fit_offset

        idx = positions(dataset, train)
        j = list(dataset.target_names).index(TARGET)
        measured = np.asarray(dataset.targets, dtype=np.float64)[idx, j]
        self.offset_mb, self.scale = fit_offset(self._simulated(dataset, idx), measured)
        return self

    def predict(self, dataset, idx: Optional[Sequence[int]] = None) -> np.ndarray:
        idx = positions(dataset, idx)
        out = np.full((len(idx), len(dataset.target_names)), np.nan)
        out[:, list(dataset.target_names).index(TARGET)] = self.offset_mb + self.scale * self._simulated(dataset, idx)
        return out
