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

A class no training job has (no recurrent layer among the training families, say) would get
the weight 0 from the fit, and a job made of it would be predicted to take no time: such a class
takes the rates of the class it runs like (:data:`UNSEEN_CLASS_RATES`: recurrent layers,
attention and convolutions are GEMMs on a CPU; normalization, pooling and embeddings are
memory-bound like the elementwise rest).

This module holds the model and the form a checkpoint keeps it in (:class:`RooflineMember`,
plain numbers); fitting it as an estimator (``roofline`` in
:mod:`driple.inspector.estimator_registry`) or into an inspector:
:mod:`driple.inspector.roofline_estimator`, :func:`driple.inspector.ensemble.with_roofline`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from driple.errors import DripleError
from driple.graph.summary_features import GRAPH_FEATURES, OP_CLASSES, priors
from driple.inspector.graph_inputs import stack_graph_features

#: Seconds one compute op costs per unit of its weight (a dispatch overhead of this order).
OP_OVERHEAD_S = 1e-5


#: The class whose rates a class takes when no training job has it (module docstring).
UNSEEN_CLASS_RATES = {"conv": "matmul", "attn": "matmul", "rnn": "matmul",
                      "norm": "other", "pool": "other", "embed": "other"}


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


def fill_unseen_classes(weights: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``weights`` (of :func:`fit_rates` on the design rows ``X``) with the FLOP and traffic rates
    of every op class that is zero in all of ``X`` taken from its :data:`UNSEEN_CLASS_RATES`
    class (if that one was seen)."""
    classes = list(OP_CLASSES)
    k = len(classes)
    seen = np.abs(np.nan_to_num(np.asarray(X, dtype=np.float64))).sum(0) > 0
    out = np.array(weights, dtype=np.float64, copy=True)
    for c, like in UNSEEN_CLASS_RATES.items():
        i, j = classes.index(c), classes.index(like)
        if not (seen[i] or seen[k + i]) and (seen[j] or seen[k + j]):
            out[i], out[k + i] = out[j], out[k + j]
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

    def choose(self, predicted: np.ndarray, graphs: Sequence, measured: np.ndarray) -> "RooflineMember":
        """Set each duration's mode by :func:`choose_modes` on these (validation) ``graphs``: the
        inspector's ``predicted`` and the ``measured`` targets ``[n, targets]``."""
        self.modes = choose_modes(self.targets, predicted, self.predict(graphs), measured)
        return self

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


def fit_member(graph_features: np.ndarray, measured: np.ndarray, targets: Sequence[str], setting: str,
               host) -> RooflineMember:
    """A roofline fitted on jobs' stacked ``graph_features`` and ``measured`` targets ``[n,
    targets]``: the rates of every duration target, each mode ``"inspector"`` until
    :meth:`RooflineMember.choose`."""
    X = design_matrix(graph_features, setting, host)
    y = np.asarray(measured, dtype=np.float64)
    weights = {t: fill_unseen_classes(fit_rates(X, y[:, j]), X).tolist()
               for j, t in enumerate(targets) if is_duration(t)}
    return RooflineMember(targets, setting, host, weights, dict.fromkeys(weights, "inspector"))
