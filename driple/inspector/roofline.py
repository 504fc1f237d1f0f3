"""The per-op-class roofline: step time and every duration as a sum of physical terms, one
fitted rate per op class.

    duration ~ sum over op classes c of  a_c x FLOPs_c / GEMM FLOP/s  +  b_c x bytes_c / copy B/s
               + d x communicated bytes / link rate  +  e x compute ops x 10 us
               + f x the strategy's messages x 1 ms

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

**Terms** (``terms``): ``"all"`` fits both rates of every class (the default, as shipped);
``"physical"`` only the term that bounds each class on a CPU (:data:`COMPUTE_CLASSES` by their
FLOPs, the memory-bound rest by their traffic: an unconstrained fit gives normalization FLOPs a
rate of ~200x the GEMM peak as a stand-in for something else). Measured as the
``roofline-physical`` estimator (the evaluation report, `trained_models/evaluation/results.md`), not shipped.

**Overlap** (optional, ``overlap=True``; the ``roofline-overlap`` estimator): DDP all-reduces a
bucket while the backward pass computes the next, a parameter server's pushes run beside
compute, so communication and compute do not simply add up. With it the fit also takes, per
target, a fraction ``alpha`` of the shorter of the two that is hidden under the other:

    duration ~ compute + comm - alpha x min(compute, comm)

``alpha`` from :data:`OVERLAP_GRID` by the same relative error on the training jobs (0 is the
plain sum and gives exactly the fit without overlap; each alpha's rates are NNLS with the
shorter side scaled by ``1 - alpha``, refitted a few times as the shorter side may change).

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

from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.graph.summary_features import GRAPH_FEATURES, OP_CLASSES, priors
from driple.inspector.graph_inputs import stack_graph_features

#: Seconds one compute op costs per unit of its weight (a dispatch overhead of this order).
OP_OVERHEAD_S = 1e-5


#: Overlap fractions the fit tries (module docstring); 0 is the plain sum.
OVERLAP_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Seconds one message of the strategy costs per unit of its weight (a collective's latency).
MESSAGE_OVERHEAD_S = 1e-3
#: Columns of :func:`design_matrix`: the communication term, the op overhead, the messages.
COMM_COLUMN = 2 * len(OP_CLASSES)
OVERHEAD_COLUMN = COMM_COLUMN + 1
MESSAGE_COLUMN = COMM_COLUMN + 2


#: The class whose rates a class takes when no training job has it (module docstring).
UNSEEN_CLASS_RATES = {"conv": "matmul", "attn": "matmul", "rnn": "matmul",
                      "norm": "other", "pool": "other", "embed": "other"}


def is_duration(target: str) -> bool:
    """Targets that are times a roofline adds up: the burst and idle durations, the step time."""
    return target.endswith("_duration") or target == "step_time"


def design_matrix(graph_features: np.ndarray, setting, host) -> np.ndarray:
    """``[n, 2 x classes + 3]`` seconds per job: per class FLOPs / GEMM FLOP/s, per class traffic
    / copy bandwidth, communication time (``prior_comm_s``), compute ops x :data:`OP_OVERHEAD_S`,
    the strategy's messages x :data:`MESSAGE_OVERHEAD_S`."""
    f = np.atleast_2d(np.asarray(graph_features, dtype=np.float64))
    col = {k: f[:, i] for i, k in enumerate(GRAPH_FEATURES)}
    cols = [col[f"gflops_{c}"] * 1e9 / host.flops_per_s for c in OP_CLASSES]
    cols += [col[f"traffic_mb_{c}"] * 1e6 / host.memory_bytes_per_s for c in OP_CLASSES]
    cols += [priors(f, setting, host)["prior_comm_s"], col["compute_ops"] * OP_OVERHEAD_S,
             col["comm_messages"] * MESSAGE_OVERHEAD_S]
    return np.stack(cols, axis=1)


#: Classes a CPU runs at a fraction of its GEMM peak (their FLOPs bound them); the others are
#: memory-bound (their traffic does). The ``"physical"`` terms (module docstring).
COMPUTE_CLASSES = ("conv", "matmul", "attn", "rnn")
#: Term sets a fit can use (module docstring).
TERMS = ("all", "physical")


def term_columns(terms: str, messages: bool = True) -> np.ndarray:
    """Boolean mask of the :func:`design_matrix` columns a fit with ``terms`` (``"all"`` or
    ``"physical"``) may weight; communication and op overhead always, the messages with
    ``messages`` (off: the roofline of a checkpoint from before that term, fitted again alike)."""
    classes = list(OP_CLASSES)
    if terms == "all":
        flops = [True] * len(classes)
        mask = flops + flops
    elif terms == "physical":
        flops = [c in COMPUTE_CLASSES for c in classes]
        mask = flops + [not f for f in flops]
    else:
        raise DripleError(f"unknown roofline terms {terms!r}; choose among {', '.join(TERMS)}")
    return np.array(mask + [True, True, bool(messages)])


def fit_rates(X: np.ndarray, y: np.ndarray, columns: Optional[np.ndarray] = None) -> np.ndarray:
    """Non-negative weights ``w`` minimising the relative error ``sum((X w / y - 1)^2)`` over the
    rows with a positive, finite ``y`` (scipy's NNLS); with a boolean ``columns`` mask, only those
    columns get a weight (the others 0)."""
    from scipy.optimize import nnls

    ok = _fit_rows(X, y)
    if not ok.any():
        raise DripleError("no training job with a positive measured value to fit the roofline on")
    cols = np.ones(X.shape[1], dtype=bool) if columns is None else np.asarray(columns, dtype=bool)
    w = np.zeros(X.shape[1])
    w[cols], _ = nnls(X[ok][:, cols] / y[ok, None], np.ones(int(ok.sum())), maxiter=50 * int(cols.sum()))
    return w


def _fit_rows(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The rows a fit uses: a positive, finite measured value and finite design terms."""
    return np.isfinite(y) & (y > 0) & np.isfinite(X).all(1)


def _compute_and_comm(X: np.ndarray, w: np.ndarray) -> tuple:
    """``(compute, comm)`` seconds of the design rows ``X`` with weights ``w``: the communication
    term, and every other weighted term summed. The messages count with the compute: their cost
    is the training thread's wait in each collective call, not bytes that move beside the
    backward pass (on the shipped split's validation jobs of FSDP over loopback, the roofline's
    step time 9.8 % off so, 11.4 % with the messages counted as communication)."""
    comm = X[:, COMM_COLUMN] * w[COMM_COLUMN]
    return X @ w - comm, comm


def overlapped(X: np.ndarray, weights: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """Durations of the design rows ``X``: compute + comm - ``alpha`` x min(compute, comm), compute
    being every weighted term but the communication (``alpha`` 0: ``X @ weights``)."""
    w = np.asarray(weights, dtype=np.float64)
    if not alpha:
        return X @ w
    compute, comm = _compute_and_comm(X, w)
    return compute + comm - alpha * np.minimum(compute, comm)


def fit_overlap(X: np.ndarray, y: np.ndarray, grid: Sequence[float] = OVERLAP_GRID,
                rounds: int = 4, columns: Optional[np.ndarray] = None) -> tuple:
    """``(weights, alpha)``: per ``alpha`` of ``grid``, NNLS rates with the shorter of compute and
    communication scaled by ``1 - alpha`` (which side is shorter taken from the previous fit,
    ``rounds`` times), the pair with the lowest relative squared error on the rows of
    :func:`fit_rates`. ``alpha`` 0 gives :func:`fit_rates`'s weights. ``columns``: as for
    :func:`fit_rates`."""
    ok = _fit_rows(X, y)
    start = fit_rates(X, y, columns)
    compute_cols = [j for j in range(X.shape[1]) if j != COMM_COLUMN]
    best = None
    for alpha in grid:
        w = start
        for _ in range(rounds if alpha else 0):
            compute, comm = _compute_and_comm(X, w)
            comm_shorter = comm < compute
            scaled = np.array(X, dtype=np.float64, copy=True)
            scaled[comm_shorter, COMM_COLUMN] *= 1.0 - alpha
            scaled[np.ix_(~comm_shorter, compute_cols)] *= 1.0 - alpha
            w = fit_rates(scaled, y, columns)
        loss = float(np.sum((overlapped(X[ok], w, alpha) / y[ok] - 1.0) ** 2))
        if best is None or loss < best[0] - 1e-12:
            best = (loss, w, float(alpha))
    return best[1], best[2]


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
    return choose_among(targets, inspector, {"": roofline}, measured)


def choose_among(targets: Sequence[str], inspector: np.ndarray, rooflines: dict, measured: np.ndarray) -> dict:
    """:func:`choose_modes` over several rooflines (``{name: [n, targets]}``): each duration's
    mode ``"roofline:<name>"`` / ``"mean:<name>"`` (bare for the name ``""``) or ``"inspector"``,
    the lowest MAPE on these jobs; ties keep the inspector, then the earlier roofline."""
    from driple.inspector.trees import geometric_mean

    modes = {}
    for j, t in enumerate(targets):
        if not is_duration(t):
            continue
        y = measured[:, j]
        ok = np.isfinite(y) & (y > 0)
        options = {"inspector": inspector[:, j]}
        for name, r in rooflines.items():
            options["roofline" + (f":{name}" if name else "")] = r[:, j]
            options["mean" + (f":{name}" if name else "")] = geometric_mean(inspector[:, j], r[:, j])
        mape = {m: float(np.mean(np.abs(p[ok] - y[ok]) / y[ok])) if ok.any() and np.isfinite(p[ok]).all() else np.inf
                for m, p in options.items()}
        modes[t] = min(options, key=lambda m: mape[m])  # dict order: the inspector first
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
        host: :class:`~driple.hardware.host_speed.HostSpeed` the terms divide by.
        weights: ``{duration target: [weight per design column]}`` (a shorter list, of a checkpoint
            from before a column existed: 0 for the columns it lacks).
        modes: ``{duration target: mode}`` (:data:`MODES`), chosen on validation jobs.
        overlap: ``{duration target: alpha}`` (:func:`overlapped`; a target not in it: 0, the
            plain sum, as in checkpoints from before the overlap).
        terms: ``{duration target: "all" | "physical"}``, the terms its rates were fitted on
            (a record: the weights say it too; a target not in it: ``"all"``).
        messages: Whether its rates were fitted with the message term (False in checkpoints
            from before it: a fit again for them, :func:`driple.evaluation.rejoin.shipped_rejoin`,
            leaves it out alike).
    """

    def __init__(self, targets: Sequence[str], setting: str, host, weights: dict, modes: dict,
                 overlap: Optional[dict] = None, terms: Optional[dict] = None, messages: bool = False):
        unknown = [m for m in modes.values() if m not in MODES]
        if unknown:
            raise DripleError(f"unknown roofline mode(s) {', '.join(unknown)}; choose among {', '.join(MODES)}")
        self.targets, self.setting, self.host = tuple(targets), str(setting), host
        # a checkpoint from before the message term has no weight for it: 0, it reads as it did
        width = MESSAGE_COLUMN + 1
        wider = sorted(t for t, w in weights.items() if len(w) > width)
        if wider:
            raise DripleError(f"roofline weights of {', '.join(wider)} have more than the {width} terms this "
                              "driple's roofline has: a checkpoint from a newer driple")
        self.weights = {t: [float(x) for x in w] + [0.0] * (width - len(w)) for t, w in weights.items()}
        self.modes = dict(modes)
        self.overlap = {t: float(a) for t, a in (overlap or {}).items() if a}
        self.terms = {t: str(v) for t, v in (terms or {}).items() if v != "all"}
        self.messages = bool(messages)
        outside = [t for t, a in self.overlap.items() if not 0.0 <= a <= 1.0]
        if outside:
            raise DripleError(f"roofline overlap of {', '.join(outside)} must be between 0 and 1")

    def predict(self, graphs: Sequence) -> np.ndarray:
        """``[n, targets]``: the roofline's durations (NaN for the other targets)."""
        X = design_matrix(stack_graph_features(graphs), self.setting, self.host)
        out = np.full((len(X), len(self.targets)), np.nan)
        for t, w in self.weights.items():
            out[:, self.targets.index(t)] = overlapped(X, w, self.overlap.get(t, 0.0))
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
        state = {"targets": list(self.targets), "setting": self.setting, "host": self.host.to_dict(),
                 "weights": self.weights, "modes": self.modes}
        if self.overlap:  # absent: the plain sum (checkpoints from before the overlap read the same)
            state["overlap"] = self.overlap
        if self.terms:  # absent: every term (checkpoints from before the choice read the same)
            state["terms"] = self.terms
        if self.messages:  # absent: fitted before the message term
            state["messages"] = True
        return state

    @classmethod
    def from_state(cls, state: dict) -> "RooflineMember":
        from driple.hardware.host_speed import HostSpeed

        return cls(state["targets"], state["setting"], HostSpeed.from_dict(state["host"]),
                   state["weights"], state["modes"], state.get("overlap"), state.get("terms"),
                   bool(state.get("messages", False)))


def fit_member(graph_features: np.ndarray, measured: np.ndarray, targets: Sequence[str], setting: str,
               host, overlap: bool = False, terms: str = "all", messages: bool = True) -> RooflineMember:
    """A roofline fitted on jobs' stacked ``graph_features`` and ``measured`` targets ``[n,
    targets]``: the rates of every duration target (with ``overlap``, also its overlap fraction,
    :func:`fit_overlap`) on the ``terms`` of :data:`TERMS` (and the message term with
    ``messages``), each mode ``"inspector"`` until :meth:`RooflineMember.choose`."""
    cols = term_columns(terms, messages)
    X = design_matrix(graph_features, setting, host)
    y = np.asarray(measured, dtype=np.float64)
    weights, alphas, used = {}, {}, {}
    for j, t in enumerate(targets):
        if not is_duration(t):
            continue
        used[t] = terms
        w, alphas[t] = fit_overlap(X, y[:, j], columns=cols) if overlap else (fit_rates(X, y[:, j], cols), 0.0)
        weights[t] = fill_unseen_classes(w, X).tolist()
    return RooflineMember(targets, setting, host, weights, dict.fromkeys(weights, "inspector"), alphas, used, messages)
