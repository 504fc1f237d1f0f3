"""The per-op-class roofline (:mod:`driple.inspector.roofline`) as an estimator of its own, and
joined into another estimator per duration target as the shipped inspector joins it (what the
evaluation retrains per fold)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.estimators import Estimator, graphs_of, positions
from driple.inspector.graph_inputs import stack_graph_features
from driple.inspector.roofline import apply_modes, choose_modes, design_matrix, fit_rates, is_duration


class RooflineEstimator(Estimator):
    """The per-op-class roofline of every duration target and the step time (module docstring);
    NaN for the amounts.

    Args:
        host: Host figures the terms divide by (default: as for training an inspector,
            :func:`driple.inspector.train.training_host`).

    Learned attributes: ``names_`` (the dataset's targets), ``weights_`` (``{target: [w...]}``,
    plain floats), ``host_``, ``setting_``.
    """

    name = "roofline"

    def __init__(self, host=None):
        self.host = host

    def fit(self, dataset, train: Sequence[int], val: Sequence[int] = ()) -> "RooflineEstimator":
        from driple.inspector.train import common_attribute, training_host

        train = positions(dataset, train)
        graphs = graphs_of(dataset, train)
        self.names_ = list(dataset.target_names)
        self.host_ = training_host(dataset, self.host)
        self.setting_ = getattr(dataset, "setting", None) or common_attribute(graphs, "setting")
        if not self.setting_:
            raise DripleError("the roofline needs the setting the jobs ran in")
        X = design_matrix(stack_graph_features(graphs), self.setting_, self.host_)
        y = np.asarray(dataset.targets, dtype=np.float64)[train]
        self.weights_ = {t: fit_rates(X, y[:, j]).tolist()
                         for j, t in enumerate(self.names_) if is_duration(t)}
        return self

    def predict(self, dataset, idx: Optional[Sequence[int]] = None) -> np.ndarray:
        graphs = graphs_of(dataset, idx)
        out = np.full((len(graphs), len(self.names_)), np.nan)
        if graphs:
            X = design_matrix(stack_graph_features(graphs), self.setting_, self.host_)
            for t, w in self.weights_.items():
                out[:, self.names_.index(t)] = X @ np.asarray(w)
        return out


class WithRoofline(Estimator):
    """An estimator with a roofline fitted on the same training jobs, joined per duration target
    as chosen on the fold's validation jobs (what :func:`with_roofline` does to a checkpoint):
    the shipped inspector's configuration, trained again per fold by the evaluation."""

    def __init__(self, inner: Estimator, host=None, name: Optional[str] = None):
        self.inner, self.host = inner, host
        self.name = name or f"{inner.name}+roofline"

    @property
    def note_(self) -> Optional[str]:
        return getattr(self.inner, "note_", None)

    def fit(self, dataset, train, val) -> "WithRoofline":
        self.inner.fit(dataset, train, val)
        self.roofline_ = RooflineEstimator(host=self.host).fit(dataset, train)
        val = positions(dataset, val) if len(val) else []
        names = list(dataset.target_names)
        self.modes_ = dict.fromkeys(self.roofline_.weights_, "inspector")
        if val:
            measured = np.asarray(dataset.targets, dtype=np.float64)[val]
            self.modes_ = choose_modes(names, self.inner.predict(dataset, val),
                                       self.roofline_.predict(dataset, val), measured)
        return self

    def predict(self, dataset, idx=None) -> np.ndarray:
        return apply_modes(self.inner.predict(dataset, idx), self.roofline_.predict(dataset, idx),
                           self.roofline_.names_, self.modes_)
