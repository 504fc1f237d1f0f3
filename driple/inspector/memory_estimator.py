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
    """The simulated peak (MB, at the collector's sample points) of a results row's job, with the
    buffers the BLAS of the row's machine keeps (:func:`row_blas_path`); NaN when it cannot be
    traced. ``cache`` keeps one answer per job configuration and machine."""
    from driple.errors import DripleError
    from driple.graph.memory import simulate_job
    from driple.inspector.dataset import job_config
    from driple.settings import parse_setting

    c = job_config(row)
    path = row_blas_path(row)
    key = json.dumps([c, path], sort_keys=True)
    if key not in cache:
        try:
            setting = parse_setting(c["setting"])
            cache[key] = simulate_job(c["model"], c["batch_size"], c["optimizer"], setting.strategy,
                                      sampled=True, workers=setting.workers, blas_path=path, **c["knobs"]).peak_mb
        except DripleError:
            cache[key] = float("nan")
    return cache[key]


def row_blas_path(row: dict) -> str:
    """The BLAS code path of the machine a results row names (its spec's, else the one recorded
    for its ``cpu_model``: :func:`driple.hardware.blas.machine_path`)."""
    from driple.hardware.blas import machine_path, spec_path
    from driple.hardware.rows import row_spec

    spec = row_spec(row)
    return spec_path(spec) if spec is not None else machine_path("", row.get("cpu_model"))


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
