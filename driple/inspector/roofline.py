"""The per-op-class roofline: step time and every duration as a sum of physical terms, one
fitted rate per op class.

    duration ~ sum over op classes c of  a_c x FLOPs_c / GEMM FLOP/s  +  b_c x bytes_c / copy B/s
               + d x communicated bytes / link rate  +  e x compute ops x 10 us

The terms are the host figures' roofline (:mod:`driple.graph.summary_features`, its priors)
split by op class (:data:`~driple.graph.summary_features.OP_CLASSES`). A CPU runs convolutions,
matmuls, normalizations and elementwise ops at very different fractions of its peaks, and a
family's step time follows its mix of classes; one factor for all (the ``analytic`` baseline)
cannot follow that, a per-class rate learned on other families can. The weights are fitted per
target by non-negative least squares on the relative error (each training job's row divided
by its measured value: a 10 ms job counts as much as a 1 s one), so every weight stays a
physical "this class runs at 1 / a_c of the peak", and an unseen family is predicted from its
own op mix rather than from its neighbours in a feature space.

It predicts the duration targets and the step time (NaN for the amounts: those are not sums of
times). Fitting is a few milliseconds; nothing to choose on validation jobs.

Interface as the other estimators (:class:`~driple.inspector.estimators.Estimator`):
``roofline`` in :mod:`driple.inspector.estimator_registry`.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.graph.summary_features import GRAPH_FEATURES, OP_CLASSES, priors
from driple.inspector.estimators import Estimator, graphs_of, positions
from driple.inspector.graph_inputs import stack_graph_features

#: Seconds one compute op costs per unit of its weight (a dispatch overhead of this order).
OP_OVERHEAD_S = 1e-5


def is_duration(target: str) -> bool:
    """Targets that are times a roofline adds up: the burst and idle durations, the step time."""
    return target.endswith("_duration") or target == "step_time"


def design_matrix(graph_features: np.ndarray, setting, host) -> np.ndarray:
    """``[n, 2 x classes + 2]`` seconds per job: per class FLOPs / GEMM FLOP/s, per class traffic
    / copy bandwidth, communication time (``prior_comm_s``), compute ops x :data:`OP_OVERHEAD_S`."""
    f = np.atleast_2d(np.asarray(graph_features, dtype=np.float64))
    col = {k: f[:, i] for i, k in enumerate(GRAPH_FEATURES)}
    cols = [col[f"gflops_{c}"] * 1e9 / host.flops_per_s for c in OP_CLASSES]
    cols += [col[f"traffic_mb_{c}"] * 1e6 / host.memory_bytes_per_s for c in OP_CLASSES]
    cols += [priors(f, setting, host)["prior_comm_s"], col["compute_ops"] * OP_OVERHEAD_S]
    return np.stack(cols, axis=1)


def fit_rates(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative weights ``w`` minimising the relative error ``sum((X w / y - 1)^2)`` over the
    rows with a positive, finite ``y`` (scipy's NNLS)."""
    from scipy.optimize import nnls

    ok = np.isfinite(y) & (y > 0) & np.isfinite(X).all(1)
    if not ok.any():
        raise DripleError("no training job with a positive measured value to fit the roofline on")
    w, _ = nnls(X[ok] / y[ok, None], np.ones(int(ok.sum())), maxiter=50 * X.shape[1])
    return w


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


# ---------------------------------------------------------------------- inside an inspector
#: How the roofline joins an inspector's prediction of a duration target: ``"inspector"`` (not
#: at all), ``"roofline"`` (replaces it), ``"mean"`` (geometric mean of the two).
MODES = ("inspector", "roofline", "mean")


def choose_modes(targets: Sequence[str], inspector: np.ndarray, roofline: np.ndarray,
                 measured: np.ndarray) -> dict:
    """Per duration target, the mode of :data:`MODES` with the lowest MAPE on these (validation)
    jobs; ``"inspector"`` where no job has a positive measured value (ties keep the earlier)."""
    from driple.inspector.trees import geometric_mean

    modes = {}
    for j, t in enumerate(targets):
        if not is_duration(t):
            continue
        y = measured[:, j]
        ok = np.isfinite(y) & (y > 0)
        if not ok.any():
            modes[t] = "inspector"
            continue
        options = {"inspector": inspector[:, j], "roofline": roofline[:, j],
                   "mean": geometric_mean(inspector[:, j], roofline[:, j])}
        mape = {m: float(np.mean(np.abs(p[ok] - y[ok]) / y[ok])) if np.isfinite(p[ok]).all() else np.inf
                for m, p in options.items()}
        modes[t] = min(MODES, key=lambda m: mape[m])
    return modes


def apply_modes(predicted: np.ndarray, roofline: np.ndarray, targets: Sequence[str], modes: dict) -> np.ndarray:
    """``predicted`` ``[n, targets]`` with each target of ``modes`` replaced by the roofline's
    (``"roofline"``) or averaged with it (``"mean"``, geometric)."""
    from driple.inspector.trees import geometric_mean

    out = np.array(predicted, dtype=np.float64, copy=True)
    for t, mode in modes.items():
        j = list(targets).index(t)
        if mode == "roofline":
            out[:, j] = roofline[:, j]
        elif mode == "mean":
            out[:, j] = geometric_mean(out[:, j], roofline[:, j])
    return out


class RooflineMember:
    """A fitted per-op-class roofline inside an inspector checkpoint: plain numbers only.

    Args:
        targets: The inspector's targets, in its order.
        setting: The setting the communication term is computed for.
        host: :class:`~driple.graph.host_speed.HostSpeed` the terms divide by.
        weights: ``{duration target: [weight per design column]}``.
        modes: ``{duration target: mode}`` (:data:`MODES`), chosen on validation jobs.
    """

    def __init__(self, targets: Sequence[str], setting: str, host, weights: dict, modes: dict):
        unknown = [m for m in modes.values() if m not in MODES]
        if unknown:
            raise DripleError(f"unknown roofline mode(s) {', '.join(unknown)}; choose among {', '.join(MODES)}")
        self.targets, self.setting, self.host = tuple(targets), str(setting), host
        self.weights = {t: [float(x) for x in w] for t, w in weights.items()}
        self.modes = dict(modes)

    def predict(self, graphs: Sequence) -> np.ndarray:
        """``[n, targets]``: the roofline's durations (NaN for the other targets)."""
        X = design_matrix(stack_graph_features(graphs), self.setting, self.host)
        out = np.full((len(X), len(self.targets)), np.nan)
        for t, w in self.weights.items():
            out[:, self.targets.index(t)] = X @ np.asarray(w)
        return out

    def combine(self, predicted: np.ndarray, graphs: Sequence) -> np.ndarray:
        """The inspector's ``predicted`` ``[n, targets]`` with each duration target's mode applied."""
        if all(m == "inspector" for m in self.modes.values()):
            return predicted
        return apply_modes(predicted, self.predict(graphs), self.targets, self.modes)

    def to_state(self) -> dict:
        return {"targets": list(self.targets), "setting": self.setting, "host": self.host.to_dict(),
                "weights": self.weights, "modes": self.modes}

    @classmethod
    def from_state(cls, state: dict) -> "RooflineMember":
        from driple.graph.host_speed import HostSpeed

        return cls(state["targets"], state["setting"], HostSpeed.from_dict(state["host"]),
                   state["weights"], state["modes"])


def fit_member(train: Sequence, targets: Sequence[str], setting: str, host) -> dict:
    """``{duration target: weights}`` fitted on the graphs ``train`` (with ``y``)."""
    X = design_matrix(stack_graph_features(train), setting, host)
    y = np.concatenate([g.y.view(1, -1).double().numpy() for g in train])
    return {t: fit_rates(X, y[:, j]).tolist() for j, t in enumerate(targets) if is_duration(t)}


def with_roofline(inspector, dataset, split):
    """A copy of ``inspector`` (sharing its network and tree member) with a roofline fitted on the
    split's training jobs attached, each duration's mode chosen on its validation jobs, scored
    again on the split (``info["scores"]``)."""
    import copy

    from driple.inspector.train import score_split, training_host

    host = inspector.host or training_host(dataset)
    train = [dataset[i] for i in split.train]
    val = [dataset[i] for i in split.val]
    weights = fit_member(train, inspector.targets, dataset.setting, host)
    member = RooflineMember(inspector.targets, dataset.setting, host, weights,
                            dict.fromkeys(weights, "inspector"))
    out = copy.copy(inspector)
    out.info = dict(inspector.info)
    out.attach_roofline(None)
    if val:
        measured = np.concatenate([g.y.view(1, -1).double().numpy() for g in val])
        member.modes = choose_modes(inspector.targets, out.predict(val), member.predict(val), measured)
    out.attach_roofline(member)
    out.info["scores"] = score_split(out, dataset, split)
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
