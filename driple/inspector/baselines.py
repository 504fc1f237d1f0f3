"""Baselines the inspector must beat, fitted on the same training jobs.

- :class:`MeanBaseline` predicts every metric as its training mean.
- :class:`TabularBaseline` is a scikit-learn regressor (gradient boosting or k nearest
  neighbours) per metric on the graph-level attributes ``log1p(graph_attr)`` (parameters,
  GFLOPs, activation MB, communicated MB, batch size, ops; see
  :data:`driple.graph.build.GRAPH_ATTRS`) — what a scheduler could do without a graph network.
"""
from __future__ import annotations

import numpy as np

BASELINES = ("mean", "gbr", "knn")


class MeanBaseline:
    """Predicts each column's training mean (NaN targets ignored)."""

    def fit(self, X, y) -> "MeanBaseline":
        y = np.asarray(y, dtype=np.float64)
        with np.errstate(all="ignore"):
            means = np.array([y[np.isfinite(y[:, j]), j].mean() if np.isfinite(y[:, j]).any()
                              else 0.0 for j in range(y.shape[1])])
        self.mean_ = means
        return self

    def predict(self, X) -> np.ndarray:
        return np.tile(self.mean_, (len(X), 1))


class TabularBaseline:
    """One scikit-learn regressor per target column on ``log1p`` of graph-level attributes.

    Args:
        kind: ``"gbr"`` (GradientBoostingRegressor) or ``"knn"`` (KNeighborsRegressor on
            standardised inputs).
        random_state: Seed of the gradient boosting's subsampling.
    """

    def __init__(self, kind: str = "gbr", random_state: int = 0):
        self.kind = kind
        self.random_state = random_state

    def _regressor(self, n_train: int):
        if self.kind == "gbr":
            from sklearn.ensemble import GradientBoostingRegressor

            return GradientBoostingRegressor(n_estimators=200, max_depth=3, learning_rate=0.05,
                                             subsample=0.8, random_state=self.random_state)
        if self.kind == "knn":
            from sklearn.neighbors import KNeighborsRegressor
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler

            return make_pipeline(StandardScaler(),
                                 KNeighborsRegressor(n_neighbors=min(5, n_train), weights="distance"))
        raise ValueError(f"unknown tabular baseline {self.kind!r}; use 'gbr' or 'knn'")

    @staticmethod
    def _inputs(X) -> np.ndarray:
        return np.log1p(np.clip(np.asarray(X, dtype=np.float64), 0, None))

    def fit(self, X, y) -> "TabularBaseline":
        X, y = self._inputs(X), np.asarray(y, dtype=np.float64)
        self.models_ = []
        for j in range(y.shape[1]):
            ok = np.isfinite(y[:, j])
            if ok.sum() == 0:
                self.models_.append(0.0)
            elif ok.sum() < 2:
                self.models_.append(float(y[ok, j].mean()))
            else:
                self.models_.append(self._regressor(int(ok.sum())).fit(X[ok], y[ok, j]))
        return self

    def predict(self, X) -> np.ndarray:
        X = self._inputs(X)
        cols = [np.full(len(X), m) if isinstance(m, float) else m.predict(X) for m in self.models_]
        return np.stack(cols, axis=1)


def make_baseline(name: str, random_state: int = 0):
    """A fresh baseline by name: ``"mean"``, ``"gbr"`` or ``"knn"``."""
    if name == "mean":
        return MeanBaseline()
    return TabularBaseline(name, random_state=random_state)
