"""The analytic step-time baseline: roofline-style physics, no learning (or one learned factor).

    step time = FLOPs / the host's GEMM FLOP/s + memory traffic / its copy bandwidth
                + communicated bytes / the link rate

(``prior_step_s`` of :mod:`driple.graph.summary_features`, on the host figures of
:mod:`driple.graph.host_speed`). What a scheduler could compute without any measured job; the
inspector has to beat it on step time. With ``calibrated=True`` one factor, the median of
measured / analytic over the training jobs, rescales it (the roofline's terms are peaks a
training step does not reach).

Interface: ``fit(train, val) -> self`` on graphs, ``predict(graphs) -> [n, 1]``
(``targets_ == ("step_time",)``).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.graph.summary_features import priors
from driple.inspector.graph_inputs import stack_graph_features

STEP_TIME = "step_time"


class AnalyticStepTime:
    """Step time (s) from FLOPs, bytes and communicated bytes against the host's figures.

    Args:
        calibrated: Fit one multiplicative factor (median measured / analytic) on the training
            jobs; False: the bare physics (``fit`` only reads the setting and host).
        host: :class:`~driple.graph.host_speed.HostSpeed` (default: as for training an
            inspector, :func:`driple.inspector.train.training_host`).
        setting: The setting id (default: the jobs').

    Learned attributes: ``host_``, ``setting_``, ``factor_`` (1.0 uncalibrated), ``targets_``.
    """

    def __init__(self, calibrated: bool = False, host=None, setting: Optional[str] = None):
        self.calibrated = calibrated
        self.host = host
        self.setting = setting

    def fit(self, train, val=None) -> "AnalyticStepTime":
        from driple.inspector.train import common_attribute, training_host

        jobs = [g for g in train]
        if not jobs:
            raise DripleError("no training jobs")
        self.setting_ = self.setting or common_attribute(jobs, "setting") or getattr(train, "setting", None)
        if not self.setting_:
            raise DripleError("the analytic step time needs the setting the jobs ran in (setting=...)")
        self.host_ = training_host(train, self.host)
        self.targets_ = (STEP_TIME,)
        self.factor_ = 1.0
        if self.calibrated:
            measured = _measured_step_time(train, jobs)
            ratio = measured / self.analytic(jobs)
            ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
            if not len(ratio):
                raise DripleError("no training job with a measured step time to calibrate on")
            self.factor_ = float(np.median(ratio))
        return self

    def analytic(self, graphs: Sequence) -> np.ndarray:
        """The bare roofline step time ``[n]`` (s), before calibration."""
        return priors(stack_graph_features(list(graphs)), self.setting_, self.host_)["prior_step_s"]

    def predict(self, graphs) -> np.ndarray:
        """Step time ``[n, 1]`` (s)."""
        return (self.factor_ * self.analytic(graphs)).reshape(-1, 1)


def _measured_step_time(dataset, jobs: Sequence) -> np.ndarray:
    names = list(getattr(dataset, "target_names", None) or [])
    if not names:
        from driple.metrics import target_names

        names = list(target_names())
    if STEP_TIME not in names:
        raise DripleError("the jobs carry no step_time target (labels v1); calibrate on a v2 dataset")
    j = names.index(STEP_TIME)
    return np.array([float(g.y.view(-1)[j]) for g in jobs])
