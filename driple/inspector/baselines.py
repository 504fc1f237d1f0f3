"""Baselines a graph model must beat, fitted on the same folds in the same run.

All are :class:`~driple.inspector.estimators.Estimator` s: ``fit(dataset, train, val)``,
``predict(dataset, idx)``. They read a job's *graph-level attributes* (``graph_attr``: see
:data:`driple.graph.build.GRAPH_ATTRS` — parameters, GFLOPs, activation MB, communicated MB,
batch size, ops) and its configuration (optimizer, model, architecture: see
:mod:`driple.inspector.jobs`); what the three are:

- :class:`MeanBaseline` (``mean``): every target's training mean.
- :class:`HGBBaseline` (``hgb``): scikit-learn's ``HistGradientBoostingRegressor``, one per
  target, on ``log(y + eps)`` (``eps``: 1 % of the target's training median), inputs
  ``log1p(graph_attr)`` and the optimizer one-hot; the number of boosting iterations is chosen
  per target on the validation jobs.
- :class:`HGBPriors` (``hgb-priors``): the same boosting on the hybrid inspector's graph-level
  features and physical priors, as log residuals over the priors (the hybrid without its graph).
- :class:`NearestArchitecture` (``knn``): copies the labels of the nearest training
  configuration (architecture + batch size + optimizer; the mean of its jobs). Distance between
  jobs ``a`` and ``b``::

      d(a, b) = sqrt(mean_c (z_c(a) - z_c(b))^2) + w_opt [opt(a) != opt(b)] + w_model [model(a) != model(b)]

  with ``z_c`` the graph attribute ``log1p(graph_attr_c)`` standardised over the training
  configurations (attributes constant in training are left out), ``w_opt = w_model = 1``:
  another optimizer or model counts as one standard deviation on every attribute. Ties go to
  the configuration seen first.

Each also has ``fit_rows(train, val)`` / ``predict_rows(rows)`` on :class:`JobRows` (arrays
and a table), which the tests call on hand-written tables.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from driple.inspector.estimators import Estimator, positions
from driple.inspector.jobs import job_table

BASELINES = ("mean", "hgb", "hgb-priors", "knn")


@dataclass
class JobRows:
    """Some jobs as a table: ``attrs`` ``[n, A]`` raw graph-level attributes, ``table`` their
    configuration rows (:func:`~driple.inspector.jobs.job_table` columns), ``y`` ``[n, T]`` the
    measured targets in raw units (NaN = not measured; None when predicting)."""

    attrs: np.ndarray
    table: pd.DataFrame
    y: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.table)


def job_rows(dataset, idx: Optional[Sequence[int]] = None, with_targets: bool = True) -> JobRows:
    """The jobs of ``dataset`` at ``idx`` (default all) as :class:`JobRows`."""
    idx = positions(dataset, idx)
    table = job_table(dataset).iloc[idx].reset_index(drop=True)
    attrs = np.asarray(dataset.graph_attrs, dtype=np.float64)[idx]
    y = np.asarray(dataset.targets, dtype=np.float64)[idx] if with_targets else None
    return JobRows(attrs, table, y)


class TabularEstimator(Estimator):
    """An estimator that needs only :class:`JobRows`: ``fit``/``predict`` build them."""

    def fit(self, dataset, train, val) -> "TabularEstimator":
        return self.fit_rows(job_rows(dataset, train), job_rows(dataset, val))

    def predict(self, dataset, idx=None) -> np.ndarray:
        return self.predict_rows(job_rows(dataset, idx, with_targets=False))

    def fit_rows(self, train: JobRows, val: Optional[JobRows] = None) -> "TabularEstimator":
        raise NotImplementedError

    def predict_rows(self, rows: JobRows) -> np.ndarray:
        raise NotImplementedError


def log_attrs(attrs) -> np.ndarray:
    """``log1p`` of the graph-level attributes (negative values read as 0)."""
    return np.log1p(np.clip(np.asarray(attrs, dtype=np.float64), 0, None))


class MeanBaseline(TabularEstimator):
    """Predicts each target's mean over the training jobs (NaN ignored; 0 if never measured)."""

    name = "mean"

    def fit_rows(self, train, val=None):
        y = np.asarray(train.y, dtype=np.float64)
        ok = np.isfinite(y)
        self.mean_ = np.where(ok.any(0), np.nansum(np.where(ok, y, 0), 0) / np.maximum(ok.sum(0), 1), 0.0)
        return self

    def predict_rows(self, rows):
        return np.tile(self.mean_, (len(rows), 1))


class HGBBaseline(TabularEstimator):
    """Gradient boosting per target on log targets (see the module doc).

    Args:
        max_iter: Most boosting iterations; the number used is chosen per target on the
            validation jobs (lowest RMSE of the log target), all of them without validation jobs.
        learning_rate, max_leaf_nodes, min_samples_leaf: Of ``HistGradientBoostingRegressor``
            (scikit-learn's defaults).
        random_state: Its seed.
    """

    name = "hgb"

    def __init__(self, max_iter: int = 300, learning_rate: float = 0.1, max_leaf_nodes: int = 31,
                 min_samples_leaf: int = 20, random_state: int = 0):
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state

    def _inputs(self, rows: JobRows) -> np.ndarray:
        opts = rows.table["optimizer"].astype(str).to_numpy() if "optimizer" in rows.table \
            else np.full(len(rows), "")
        onehot = np.stack([opts == o for o in self.optimizers_], 1).astype(np.float64) \
            if self.optimizers_ else np.zeros((len(rows), 0))
        return np.hstack([log_attrs(rows.attrs), onehot])

    def fit_rows(self, train, val=None):
        self.optimizers_ = sorted(set(train.table["optimizer"].astype(str))) if "optimizer" in train.table else []
        Xv = self._inputs(val) if val is not None and len(val) else None
        return self.fit_arrays(self._inputs(train), np.asarray(train.y, dtype=np.float64), Xv,
                               val.y if Xv is not None else None)

    def fit_arrays(self, X, y, Xv=None, yv=None, base=None, base_v=None) -> "HGBBaseline":
        """One model per target column of ``y`` on ``log(y + eps) - base`` (``base``: a log
        offset per job and target, e.g. of a prior; NaN or None: 0); iterations chosen on the
        validation ``Xv``, ``yv`` (``base_v``)."""
        from sklearn.ensemble import HistGradientBoostingRegressor

        base = _offsets(base, y.shape)
        self.eps_, self.models_, self.n_iter_ = [], [], []
        for j in range(y.shape[1]):
            ok = np.isfinite(y[:, j])
            med = float(np.median(y[ok, j])) if ok.any() else 0.0
            eps = 0.01 * med if med > 0 else 1e-6
            self.eps_.append(eps)
            if ok.sum() < 2:  # nothing to learn: a constant
                self.models_.append(float(y[ok, j].mean()) if ok.any() else 0.0)
                self.n_iter_.append(0)
                continue
            model = HistGradientBoostingRegressor(
                max_iter=self.max_iter, learning_rate=self.learning_rate,
                max_leaf_nodes=self.max_leaf_nodes, min_samples_leaf=self.min_samples_leaf,
                early_stopping=False, random_state=self.random_state)
            model.fit(X[ok], np.log(np.clip(y[ok, j], 0, None) + eps) - base[ok, j])
            self.models_.append(model)
            self.n_iter_.append(self._choose(model, Xv, yv[:, j] if Xv is not None else None, eps,
                                             _offsets(base_v, yv.shape)[:, j] if Xv is not None else None))
        return self

    @staticmethod
    def _choose(model, Xv, yv, eps, base_v=None) -> int:
        """Iterations with the lowest validation RMSE of the log target (all without val jobs)."""
        if Xv is None or not np.isfinite(yv).any():
            return model.n_iter_
        ok = np.isfinite(yv)
        target = np.log(np.clip(yv[ok], 0, None) + eps) - (base_v[ok] if base_v is not None else 0.0)
        errors = [np.mean((p - target) ** 2) for p in model.staged_predict(Xv[ok])]
        return int(np.argmin(errors)) + 1

    def predict_rows(self, rows):
        return self.predict_arrays(self._inputs(rows))

    def predict_arrays(self, X, base=None) -> np.ndarray:
        """Targets in raw units for inputs ``X`` (``base``: the log offsets of :meth:`fit_arrays`)."""
        base = _offsets(base, (len(X), len(self.models_)))
        cols = []
        for j, (model, n, eps) in enumerate(zip(self.models_, self.n_iter_, self.eps_)):
            if isinstance(model, float):
                cols.append(np.full(len(X), model))
                continue
            z = next(itertools.islice(model.staged_predict(X), n - 1, None))
            cols.append(np.clip(np.exp(z + base[:, j]) - eps, 0, None))
        return np.stack(cols, axis=1) if cols else np.zeros((len(X), 0))


def _offsets(base, shape) -> np.ndarray:
    """Log offsets of ``shape`` (None or NaN entries: 0)."""
    if base is None:
        return np.zeros(shape)
    return np.nan_to_num(np.asarray(base, dtype=np.float64), nan=0.0)


class HGBPriors(Estimator):
    """``hgb-priors``: :class:`HGBBaseline` on what a hybrid inspector's head reads (the graph-level
    features and physical priors of :mod:`driple.inspector.graph_inputs`, scaled the same way),
    predicting each target that declares a prior as that prior times a learned factor (log
    residual), like the hybrid. The strongest tabular model here: the hybrid minus its graph
    network, with trees instead of an MLP; what the graph part adds is measured against it.
    """

    name = "hgb-priors"

    def __init__(self, random_state: int = 0, host=None):
        self.random_state = random_state
        self.host = host

    def _arrays(self, graphs):
        """Scaled inputs ``X`` and log prior offsets of ``graphs``."""
        from driple.inspector.graph_inputs import stack_graph_features
        from driple.inspector.trees import log_offsets

        features = stack_graph_features(graphs)
        X = self.inputs_.transform(features).numpy().astype(np.float64)
        return X, log_offsets(self.inputs_.target_priors(features, self.target_prior_names_), self.prior_eps_)

    def fit_graphs(self, train: Sequence, val: Sequence, targets: Sequence[str], setting: str) -> "HGBPriors":
        """Fit on the graphs ``train`` (with ``y``), iterations chosen on ``val``."""
        from driple.graph.summary_features import BASE_FEATURES
        from driple.inspector.graph_inputs import DEFAULT_PRIORS, GraphInputs, stack_graph_features, stack_targets
        from driple.inspector.scaling import median_floor
        from driple.metrics import target

        train, val = list(train), list(val)
        features = stack_graph_features(train)
        self.inputs_ = GraphInputs(BASE_FEATURES, DEFAULT_PRIORS, setting, self.host).fit(features)
        self.target_prior_names_ = [target(t).prior for t in targets]
        # the prior's floor in proportion to the target's (1 % of the median, as HGBBaseline's):
        # a target that is c x its prior is then exactly a residual of ln c at every size
        self.prior_eps_ = [median_floor(c, fallback=1e-6)
                           for c in self.inputs_.target_priors(features, self.target_prior_names_).T]
        ytr = stack_targets(train)
        X, base = self._arrays(train)
        Xv = base_v = yv = None
        if val:
            Xv, base_v = self._arrays(val)
            yv = stack_targets(val)
        self.model_ = HGBBaseline(random_state=self.random_state).fit_arrays(X, ytr, Xv, yv, base, base_v)
        return self

    def fit(self, dataset, train, val) -> "HGBPriors":
        from driple.inspector.estimators import graphs_of
        from driple.inspector.train import training_host

        self.host = training_host(dataset, self.host)
        return self.fit_graphs(graphs_of(dataset, train), graphs_of(dataset, val), dataset.target_names,
                               dataset.setting)

    def predict(self, dataset, idx=None) -> np.ndarray:
        from driple.inspector.estimators import graphs_of

        X, base = self._arrays(graphs_of(dataset, idx))
        return self.model_.predict_arrays(X, base)


class NearestArchitecture(TabularEstimator):
    """Copies the labels of the nearest training configuration (distance in the module doc).

    Args:
        k: Configurations averaged (1: copy the nearest).
        optimizer_weight, model_weight: Distance added for another optimizer / model.
    """

    name = "knn"

    def __init__(self, k: int = 1, optimizer_weight: float = 1.0, model_weight: float = 1.0):
        self.k = k
        self.optimizer_weight = optimizer_weight
        self.model_weight = model_weight

    @staticmethod
    def _config_keys(table: pd.DataFrame) -> list:
        cols = [c for c in ("architecture", "batch_size", "optimizer") if c in table]
        return list(zip(*(table[c].astype(str) for c in cols)))

    def fit_rows(self, train, val=None):
        keys = self._config_keys(train.table)
        order = list(dict.fromkeys(keys))  # configurations in order of first appearance
        first = {k: keys.index(k) for k in order}
        y = np.asarray(train.y, dtype=np.float64)
        labels = []
        for k in order:
            rows = y[[i for i, kk in enumerate(keys) if kk == k]]
            ok = np.isfinite(rows)
            labels.append(np.where(ok.any(0), np.nansum(np.where(ok, rows, 0), 0)
                                   / np.maximum(ok.sum(0), 1), np.nan))
        self.labels_ = np.array(labels)
        # a target never measured in a configuration takes the mean over configurations
        col_mean = MeanBaseline().fit_rows(JobRows(train.attrs, train.table, y)).mean_
        self.labels_ = np.where(np.isfinite(self.labels_), self.labels_, col_mean)
        z = log_attrs(train.attrs[[first[k] for k in order]])
        self.center_ = z.mean(0)
        std = z.std(0)
        self.keep_ = std > 1e-12
        self.scale_ = np.where(self.keep_, std, 1.0)
        self.z_ = self._z(train.attrs[[first[k] for k in order]])
        tab = train.table.iloc[[first[k] for k in order]]
        self.optimizer_ = tab["optimizer"].astype(str).to_numpy() if "optimizer" in tab else None
        self.model_ = tab["model"].astype(str).to_numpy() if "model" in tab else None
        return self

    def _z(self, attrs) -> np.ndarray:
        return ((log_attrs(attrs) - self.center_) / self.scale_)[:, self.keep_]

    def distances(self, rows: JobRows) -> np.ndarray:
        """``[len(rows), configurations]`` distances to the training configurations."""
        z = self._z(rows.attrs)
        d = np.sqrt(((z[:, None, :] - self.z_[None, :, :]) ** 2).mean(2)) if z.shape[1] \
            else np.zeros((len(rows), len(self.z_)))
        if self.optimizer_ is not None and "optimizer" in rows.table:
            opt = rows.table["optimizer"].astype(str).to_numpy()
            d = d + self.optimizer_weight * (opt[:, None] != self.optimizer_[None, :])
        if self.model_ is not None and "model" in rows.table:
            model = rows.table["model"].astype(str).to_numpy()
            d = d + self.model_weight * (model[:, None] != self.model_[None, :])
        return d

    def predict_rows(self, rows):
        d = self.distances(rows)
        nearest = np.argsort(d, axis=1, kind="stable")[:, :max(1, self.k)]
        return self.labels_[nearest].mean(1)
