"""Scaling of the inspector's inputs and targets; the statistics travel in the checkpoint.

Group features arrive in raw units (MB, counts, GFLOPs) spanning orders of magnitude, so
size-like columns go through ``log1p`` and every column is then standardised with statistics of
the training graphs. Edge weights (op edges behind a group edge) go through ``log1p``.
Targets are scaled per column; the paper's code divides by the training maximum (``"max"``).
``"ln"`` takes the natural log (with a small floor per column) and can be relative to a prior
per job and target: the network then predicts ``ln(target / prior)``, a residual over physics.
"""
from __future__ import annotations

import copy
import warnings
from typing import Iterable, Sequence

import numpy as np
import torch

from driple.errors import DripleError

TARGET_METHODS = ("max", "standard", "log", "ln")


def _is_share(name: str) -> bool:
    return name.startswith("share_")  # already in [0, 1]: no log


class FeatureScaler:
    """``log1p`` of size-like columns (all but ``share_*``), then per-column z-score.

    Args:
        feature_names: Column names of ``x`` (``driple.graph.features.FEATURE_SETS[...]``).

    Graph-level attributes (``graph_attr``, all sizes or counts) get ``log1p`` and a z-score
    too, when every training graph has them.

    Learned attributes (after :meth:`fit`): ``mean_``, ``std_`` (one float per column);
    ``graph_mean_``, ``graph_std_`` (per graph attribute, or None).
    """

    def __init__(self, feature_names: Sequence[str]):
        self.feature_names = tuple(feature_names)
        self.graph_mean_ = self.graph_std_ = None

    def _log(self, x: torch.Tensor) -> torch.Tensor:
        log_cols = torch.tensor([not _is_share(n) for n in self.feature_names])
        return torch.where(log_cols, torch.log1p(x.clamp_min(0)), x)

    def fit(self, graphs: Iterable) -> "FeatureScaler":
        xs = [self.check_width(g.x) for g in graphs]
        if not xs:
            raise DripleError("cannot fit feature scaling on zero graphs")
        self.mean_, self.std_ = _moments(self._log(torch.cat(xs).double()))
        attrs = [getattr(g, "graph_attr", None) for g in graphs]
        if all(a is not None for a in attrs):
            a = torch.cat([a.double().view(1, -1) for a in attrs])
            self.graph_mean_, self.graph_std_ = _moments(torch.log1p(a.clamp_min(0)))
        return self

    def check_width(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself when it has this scaler's features per group, else a DripleError."""
        if x.dim() != 2 or x.size(1) != len(self.feature_names):
            raise DripleError(
                f"graph has {x.size(-1)} features per group but this inspector expects "
                f"{len(self.feature_names)} ({', '.join(self.feature_names)}); rebuild the graph "
                "with the inspector's feature set")
        return x

    def transform(self, data):
        """A shallow copy of ``data`` with scaled ``x`` (float32) and ``edge_weight``."""
        out = copy.copy(data)
        out.x = self.transform_x(data.x)
        weight = getattr(data, "edge_weight", None)
        if weight is None:
            weight = torch.ones(data.edge_index.size(1))
        out.edge_weight = self.transform_edge_weight(weight)
        attr = getattr(data, "graph_attr", None)
        if attr is not None and self.graph_mean_ is not None:
            out.graph_attr = self.transform_graph_attr(attr)
        elif attr is not None:
            del out.graph_attr  # never hand raw graph attributes to a model
        return out

    def transform_x(self, x: torch.Tensor) -> torch.Tensor:
        """Scaled group features (float32) of one graph or of many stacked ``[sum N, F]``."""
        x = self._log(self.check_width(x).double())
        mean = torch.tensor(self.mean_, dtype=x.dtype)
        std = torch.tensor(self.std_, dtype=x.dtype)
        return ((x - mean) / std).float()

    @staticmethod
    def transform_edge_weight(weight: torch.Tensor) -> torch.Tensor:
        """Scaled edge weights: ``log1p`` of the op edges behind each group edge (float32)."""
        return torch.log1p(weight.float().clamp_min(0))

    def transform_graph_attr(self, attr: torch.Tensor) -> torch.Tensor:
        """Scaled graph-level attributes ``[B, G]`` (one row per graph; float32)."""
        if self.graph_mean_ is None:
            raise DripleError("this feature scaling was fitted without graph attributes")
        attr = torch.log1p(attr.double().view(-1, len(self.graph_mean_)).clamp_min(0))
        mean = torch.tensor(self.graph_mean_, dtype=attr.dtype)
        std = torch.tensor(self.graph_std_, dtype=attr.dtype)
        return ((attr - mean) / std).float()

    def to_dict(self) -> dict:
        return {"feature_names": list(self.feature_names), "mean": list(self.mean_),
                "std": list(self.std_), "graph_mean": self.graph_mean_, "graph_std": self.graph_std_}

    @classmethod
    def from_dict(cls, state: dict) -> "FeatureScaler":
        scaler = cls(state["feature_names"])
        scaler.mean_, scaler.std_ = list(state["mean"]), list(state["std"])
        scaler.graph_mean_, scaler.graph_std_ = state.get("graph_mean"), state.get("graph_std")
        return scaler


def _moments(x: torch.Tensor) -> tuple[list, list]:
    """Column mean and standard deviation (1 where a column is constant)."""
    std = x.std(0, unbiased=False) if x.size(0) > 1 else torch.ones(x.size(1), dtype=x.dtype)
    return x.mean(0).tolist(), torch.where(std > 1e-8, std, torch.ones_like(std)).tolist()


def median_floor(column: np.ndarray, fallback: float = 1e-9) -> float:
    """1 % of the median positive finite value of ``column`` (``fallback`` without one): the
    floor added before a log, in proportion to the column's size."""
    col = column[np.isfinite(column) & (column > 0)]
    return 0.01 * float(np.median(col)) if len(col) else fallback


class TargetScaler:
    """Per-column scaling of the targets; NaN (a metric that could not be measured) is kept.

    Args:
        method: ``"max"`` divides by the column's training maximum of ``|y|`` (the paper's
            code); ``"standard"`` z-scores; ``"log"`` z-scores ``log1p(y)`` (for skewed
            non-negative targets such as durations); ``"ln"`` z-scores ``ln(y + eps) -
            ln(base)`` where ``eps`` is 1 % of the column's median positive training value and
            ``base`` is ``prior + prior_eps`` for a target with a prior (a residual over it:
            ``y = (prior + prior_eps) x exp(output) - eps``; ``prior_eps`` is 1 % of the
            prior's median, so a target that is c x its prior is ``ln c`` at every size) and 1
            otherwise; ``log1p`` flattens durations of milliseconds to their value, ``ln``
            keeps them relative.

    ``base`` (``ln`` only): ``[n, targets]`` priors in the targets' units, NaN where a target has
    none (see :meth:`bases`); the same priors must be given to :meth:`transform` and
    :meth:`inverse_transform` as to :meth:`fit`.

    Learned attributes: ``center_``, ``scale_`` (one float per column); ``eps_`` (``ln``);
    ``prior_eps_`` (``ln`` with priors; checkpoints from before it was recorded use ``eps_``);
    ``low_``, ``high_``: the smallest and largest training value of each column in raw units
    (the range the inspector has seen; predictions outside it are extrapolations).
    """

    def __init__(self, method: str = "max"):
        if method not in TARGET_METHODS:
            raise DripleError(f"unknown target scaling {method!r}; use one of {', '.join(TARGET_METHODS)}")
        self.method = method

    low_ = high_ = None  # checkpoints from before the range was recorded have none
    eps_ = prior_eps_ = None

    def bases(self, prior) -> np.ndarray:
        """``ln`` of the residual bases: ``ln(prior + prior_eps)`` where a prior is given, 0 elsewhere."""
        prior = np.asarray(prior, dtype=np.float64)
        floor = np.asarray(self.prior_eps_ if self.prior_eps_ is not None else self.eps_)
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(prior), np.log(np.clip(prior, 0, None) + floor), 0.0)

    def _pre(self, y: np.ndarray, prior=None) -> np.ndarray:
        if prior is not None and self.method != "ln":
            raise DripleError(f"targets relative to priors need the 'ln' target scaling, not {self.method!r}")
        if self.method == "log":
            return np.log1p(np.clip(y, 0, None))
        if self.method == "ln":
            with np.errstate(invalid="ignore"):
                out = np.log(np.clip(y, 0, None) + np.asarray(self.eps_))
            return out if prior is None else out - self.bases(prior)
        return y

    def fit(self, y, prior=None) -> "TargetScaler":
        raw = np.asarray(y, dtype=np.float64)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
            self.low_ = np.nanmin(raw, axis=0).tolist()
            self.high_ = np.nanmax(raw, axis=0).tolist()
            if self.method == "ln":
                self.eps_ = [median_floor(c) for c in raw.T]
                if prior is not None:
                    self.prior_eps_ = [median_floor(c) for c in np.asarray(prior, dtype=np.float64).T]
            y = self._pre(raw, prior)
            if self.method == "max":
                center = np.zeros(y.shape[1])
                scale = np.nanmax(np.abs(y), axis=0)
            else:
                center = np.nanmean(y, axis=0)
                scale = np.nanstd(y, axis=0)
        center = np.nan_to_num(center, nan=0.0)
        scale = np.where(np.isfinite(scale) & (scale > 1e-12), scale, 1.0)
        self.center_, self.scale_ = center.tolist(), scale.tolist()
        return self

    def transform(self, y, prior=None) -> np.ndarray:
        y = self._pre(np.asarray(y, dtype=np.float64), prior)
        return (y - np.asarray(self.center_)) / np.asarray(self.scale_)

    def inverse_transform(self, z, prior=None) -> np.ndarray:
        y = np.asarray(z, dtype=np.float64) * np.asarray(self.scale_) + np.asarray(self.center_)
        if self.method == "log":
            return np.expm1(y)
        if self.method == "ln":
            if prior is not None:
                y = y + self.bases(prior)
            return np.exp(y) - np.asarray(self.eps_)
        if prior is not None:
            raise DripleError(f"targets relative to priors need the 'ln' target scaling, not {self.method!r}")
        return y

    def to_dict(self) -> dict:
        state = {"method": self.method, "center": list(self.center_), "scale": list(self.scale_)}
        if self.low_ is not None:
            state["low"], state["high"] = list(self.low_), list(self.high_)
        if self.eps_ is not None:
            state["eps"] = list(self.eps_)
        if self.prior_eps_ is not None:
            state["prior_eps"] = list(self.prior_eps_)
        return state

    @classmethod
    def from_dict(cls, state: dict) -> "TargetScaler":
        scaler = cls(state["method"])
        scaler.center_, scaler.scale_ = list(state["center"]), list(state["scale"])
        if state.get("low") is not None:
            scaler.low_, scaler.high_ = list(state["low"]), list(state["high"])
        if state.get("eps") is not None:
            scaler.eps_ = list(state["eps"])
        elif scaler.method == "ln":
            raise DripleError("an 'ln' target scaling without its eps is incomplete")
        if state.get("prior_eps") is not None:
            scaler.prior_eps_ = list(state["prior_eps"])
        return scaler
