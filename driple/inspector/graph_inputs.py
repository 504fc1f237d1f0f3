"""The graph-level inputs of a hybrid inspector: chosen graph features and physical priors, scaled.

A hybrid inspector (:class:`~driple.inspector.model.Inspector` with ``graph_channels > 0``, or
the features-only :class:`~driple.inspector.model.FeatureMLP`) reads, besides the grouped
graph, one vector per job: graph-level features (:data:`driple.graph.summary_features.GRAPH_FEATURES`)
and physical priors (:data:`driple.graph.summary_features.PRIORS`) of the job in the
inspector's setting, on the host figures it was trained with. :class:`GraphInputs` holds those
choices, the setting, the host figures (:class:`~driple.hardware.host_speed.HostSpeed`) and the
scaling statistics; it travels in the checkpoint, so a prediction uses the trained-on hardware.

Scaling: every column but the optimizer's one-hot ones is a size, a count or a time spanning
orders of magnitude: ``ln(v + eps)`` with ``eps`` 1 % of the column's median positive training
value, then a z-score with the training jobs' statistics (a constant column: centred only).

The same object gives each target's prior (``target_priors``) for an inspector that predicts
residuals over them (``target = prior x exp(output)``, see
:class:`~driple.inspector.scaling.TargetScaler`).
"""
from __future__ import annotations

import copy
from typing import Optional, Sequence

import numpy as np
import torch

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.graph.summary_features import GRAPH_FEATURES, ONE_HOT, PRIORS, priors

#: Priors fed to the head by default: the time terms, the link rate and the memory estimate
#: (``prior_memory_pct`` and ``prior_busy_s`` add nothing a linear layer does not have already).
DEFAULT_PRIORS = ("link_mb_s", "prior_compute_s", "prior_memory_s", "prior_comm_s", "prior_step_s",
                  "prior_memory_mb")


def stack_graph_features(graphs: Sequence) -> np.ndarray:
    """``[n, len(GRAPH_FEATURES)]`` raw graph-level features of ``graphs`` (``graph_features``)."""
    rows = []
    for g in graphs:
        f = getattr(g, "graph_features", None)
        if f is None:
            raise DripleError("this inspector reads graph-level features (graph_features); build "
                              "the graph with driple.graph.build (graphs cached before driple "
                              "recorded them are rebuilt by InspectorDataset)")
        rows.append(f.double().view(1, -1).numpy() if isinstance(f, torch.Tensor)
                    else np.asarray(f, dtype=np.float64).reshape(1, -1))
    if not rows:
        return np.zeros((0, len(GRAPH_FEATURES)))
    out = np.concatenate(rows)
    if out.shape[1] != len(GRAPH_FEATURES):
        raise DripleError(f"graphs carry {out.shape[1]} graph-level features, driple computes "
                          f"{len(GRAPH_FEATURES)} ({', '.join(GRAPH_FEATURES)}); rebuild the graphs")
    return out


def stack_targets(graphs: Sequence) -> np.ndarray:
    """``[n, targets]`` measured targets of ``graphs`` (each ``g.y``), float64."""
    return np.concatenate([g.y.view(1, -1).double().numpy() for g in graphs])


class GraphInputs:
    """Chosen graph-level features and priors of jobs in one setting on one host, scaled.

    Args:
        features: Names among :data:`GRAPH_FEATURES` fed to the head.
        priors: Names among :data:`PRIORS` fed to the head.
        setting: The setting id the priors are computed for (its link rate).
        host: The host figures the priors divide by.

    Learned attributes (after :meth:`fit`): ``eps_``, ``mean_``, ``std_`` (one per column).
    """

    def __init__(self, features: Sequence[str], priors: Sequence[str], setting: str, host: HostSpeed):
        unknown = [f for f in features if f not in GRAPH_FEATURES] + [p for p in priors if p not in PRIORS]
        if unknown:
            raise DripleError(f"unknown graph-level input(s) {', '.join(unknown)}; features: "
                              f"{', '.join(GRAPH_FEATURES)}; priors: {', '.join(PRIORS)}")
        self.features, self.priors = tuple(features), tuple(priors)
        self.setting, self.host = str(setting), host
        self.eps_ = self.mean_ = self.std_ = None

    @property
    def names(self) -> tuple:
        """Column names of the head's graph-level input, in order."""
        return (*self.features, *self.priors)

    def __len__(self) -> int:
        return len(self.names)

    def raw(self, graph_features: np.ndarray) -> np.ndarray:
        """``[n, len(names)]`` unscaled columns for stacked ``graph_features``."""
        f = np.atleast_2d(np.asarray(graph_features, dtype=np.float64))
        cols = [f[:, GRAPH_FEATURES.index(k)] for k in self.features]
        if self.priors:
            p = priors(f, self.setting, self.host)
            cols += [p[k] for k in self.priors]
        return np.stack(cols, axis=1) if cols else np.zeros((len(f), 0))

    def _log_columns(self) -> np.ndarray:
        return np.array([n not in ONE_HOT for n in self.names], dtype=bool)

    def fit(self, graph_features: np.ndarray) -> "GraphInputs":
        raw = self.raw(graph_features)
        if len(raw) == 0:
            raise DripleError("cannot fit graph-level input scaling on zero graphs")
        bad = [n for n, ok in zip(self.names, np.isfinite(raw).all(0)) if not ok]
        if bad:
            raise DripleError(f"graph-level input(s) {', '.join(bad)} are not finite on the training "
                              "graphs (host memory unknown for prior_memory_pct?)")
        eps = []
        for j, is_log in enumerate(self._log_columns()):
            pos = raw[:, j][raw[:, j] > 0]
            eps.append(0.01 * float(np.median(pos)) if is_log and len(pos) else 1e-12)
        self.eps_ = eps
        z = self._log(raw)
        std = z.std(0)
        self.mean_ = z.mean(0).tolist()
        self.std_ = np.where(std > 1e-8, std, 1.0).tolist()
        return self

    def _log(self, raw: np.ndarray) -> np.ndarray:
        out = raw.copy()
        logs = self._log_columns()
        out[:, logs] = np.log(np.clip(raw[:, logs], 0, None) + np.asarray(self.eps_)[logs])
        return out

    def transform(self, graph_features: np.ndarray) -> torch.Tensor:
        """Scaled inputs ``[n, len(names)]`` (float32) for stacked ``graph_features``."""
        if self.mean_ is None:
            raise DripleError("the graph-level inputs are not fitted")
        z = (self._log(self.raw(graph_features)) - np.asarray(self.mean_)) / np.asarray(self.std_)
        return torch.as_tensor(np.nan_to_num(z, nan=0.0), dtype=torch.float32)

    def target_priors(self, graph_features: np.ndarray, names: Sequence[Optional[str]]) -> np.ndarray:
        """``[n, len(names)]``: prior ``names[j]`` of each graph in column ``j``, in the target's
        unit (NaN where ``names[j]`` is None: a target without a prior)."""
        from driple.graph.summary_features import prior_matrix

        return prior_matrix(np.atleast_2d(np.asarray(graph_features, dtype=np.float64)),
                            self.setting, self.host, list(names))

    def for_setting(self, setting: str, host: Optional[HostSpeed] = None) -> "GraphInputs":
        """A copy for another setting (transfer learning: the target setting's link rate and,
        when the target was measured on other hardware, its ``host`` figures), with the same
        scaling statistics."""
        other = copy.copy(self)
        other.setting = str(setting)
        if host is not None:
            other.host = host
        return other

    def to_dict(self) -> dict:
        return {"features": list(self.features), "priors": list(self.priors), "setting": self.setting,
                "host": self.host.to_dict(), "eps": self.eps_, "mean": self.mean_, "std": self.std_}

    @classmethod
    def from_dict(cls, state: dict) -> "GraphInputs":
        out = cls(state["features"], state["priors"], state["setting"], HostSpeed.from_dict(state["host"]))
        out.eps_, out.mean_, out.std_ = state.get("eps"), state.get("mean"), state.get("std")
        return out

    def __repr__(self) -> str:
        return (f"GraphInputs({len(self.features)} features, priors={list(self.priors)}, "
                f"setting={self.setting!r})")
