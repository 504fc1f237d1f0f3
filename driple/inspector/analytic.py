"""The analytic step-time baseline: roofline-style physics, no learning (or one learned factor).

    step time = FLOPs / the host's GEMM FLOP/s + memory traffic / its copy bandwidth
                + communicated bytes / the link rate

(``prior_step_s`` of :mod:`driple.graph.summary_features`, on the host figures of
:mod:`driple.hardware.host_speed`). What a scheduler could compute without any measured job; the
inspector has to beat it on step time. With ``calibrated=True`` one factor, the median of
measured / analytic over the training jobs, rescales it (the roofline's terms are peaks a
training step does not reach).

Interface: ``fit(train, val) -> self`` on graphs, ``predict(graphs) -> [n, 1]``
(``targets_ == ("step_time",)``). :class:`AnalyticEstimator` is the same model as an
:class:`~driple.inspector.estimators.Estimator` of every target (``analytic`` in
:mod:`driple.inspector.estimator_registry`), so that ``driple evaluate`` and
``scripts/reproduce.py`` score it beside the others in one run: it predicts the step time and
leaves the 12 burst/idle metrics unpredicted (NaN, scored as "-").
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.graph.summary_features import priors
from driple.inspector.estimators import Estimator, graphs_of, positions
from driple.inspector.graph_inputs import stack_graph_features

STEP_TIME = "step_time"


class AnalyticStepTime:
    """Step time (s) from FLOPs, bytes and communicated bytes against the host's figures.

    Args:
        calibrated: Fit one multiplicative factor (median measured / analytic) on the training
            jobs; False: the bare physics (``fit`` only reads the setting and host).
        host: :class:`~driple.hardware.host_speed.HostSpeed` (default: as for training an
            inspector, :func:`driple.inspector.train.training_host`).
        setting: The setting id (default: the jobs').

    Learned attributes: ``host_``, ``setting_``, ``factor_`` (1.0 uncalibrated), ``targets_``.
    """

    def __init__(self, calibrated: bool = False, host=None, setting: Optional[str] = None):
        self.calibrated = calibrated
        self.host = host
        self.setting = setting

    def fit(self, train, val=None, measured=None) -> "AnalyticStepTime":
        """``train``: the training jobs' graphs (a dataset, or a list with ``host`` given);
        ``measured``: their step times (s), default read from the graphs' targets."""
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
            if measured is None:
                measured = _measured_step_time(train, jobs)
            ratio = np.asarray(measured, dtype=np.float64) / self.analytic(jobs)
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


class AnalyticEstimator(Estimator):
    """:class:`AnalyticStepTime` as an estimator of all of a dataset's targets: the step time
    from the physics (calibrated on the training jobs by default), NaN for every other target.

    A dataset without the ``step_time`` target (labels v1) is refused when fitting.
    """

    name = "analytic"

    def __init__(self, calibrated: bool = True, host=None):
        self.calibrated = calibrated
        self.host = host

    def fit(self, dataset, train: Sequence[int], val: Sequence[int] = ()) -> "AnalyticEstimator":
        from driple.inspector.train import training_host

        names = list(dataset.target_names)
        if STEP_TIME not in names:
            raise DripleError("the analytic estimator predicts step_time, which this dataset does not "
                              "carry (labels v1); evaluate it on a labels v2 dataset")
        self.names_, self.column_ = names, names.index(STEP_TIME)
        train = positions(dataset, train)
        measured = np.asarray(dataset.targets, dtype=np.float64)[train, self.column_]
        ok = [i for i, m in zip(train, measured) if np.isfinite(m) and m > 0]
        self.model_ = AnalyticStepTime(
            calibrated=self.calibrated, host=training_host(dataset, self.host),
            setting=getattr(dataset, "setting", None),
        ).fit(graphs_of(dataset, ok or train),
              measured=np.asarray(dataset.targets, dtype=np.float64)[ok, self.column_] if ok else None)
        return self

    def predict(self, dataset, idx: Optional[Sequence[int]] = None) -> np.ndarray:
        graphs = graphs_of(dataset, idx)
        out = np.full((len(graphs), len(self.names_)), np.nan)
        if graphs:
            out[:, self.column_] = self.model_.predict(graphs)[:, 0]
        return out
