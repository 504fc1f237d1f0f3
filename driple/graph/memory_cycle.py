"""When in a step a worker's memory is above its midpoint: the memory burst and idle durations.

The memory label (labels v2, ``../shared/DESIGN.md``) times the allocated bytes above the
midpoint of each iteration's low and peak, read at the points the collector samples (module
boundaries of the forward pass, each gradient's accumulation, the iteration marks; a reading
holds until the next). So the share of a step spent above the midpoint follows from

- the simulated level at those points (:mod:`driple.graph.memory`): in the forward pass the
  level from which it never falls again before the loss (what a module boundary sees: an op's
  own transients are gone by then), at each gradient the live bytes, after the backward pass
  what stays until the next step starts (the gradients, and the loss, which the training loop
  holds until the step returns: a parameter-server worker's level after its push sits exactly
  at the midpoint of its gradients and the pulled copy but for it), and at the step's end what arrives
  there (a parameter-server worker's pulled copy of the parameters, after its push and the
  server's update: it raises the step's peak, and so its midpoint, for no time);
- their place in time: each op's roofline cost (FLOPs at the machine's GEMM rate plus bytes
  read and written at its copy bandwidth over :data:`BYTES_WEIGHT`), forward and backward;
- the tail, the share of the step after the backward pass (the optimizer's update, the last
  communication): ``tail / (1 - tail)`` is linear in the parameter bytes per forward-and-backward
  second, one coefficient per optimizer kind, in the bytes of the strategy's last message (a DDP
  worker's last bucket, sent after its backward pass) per second, and a constant, fitted per
  setting on measured timelines (:class:`TailFit`, ``scripts/fit_memory.py``).

The profile's memory burst is that share of the predicted step time and its idle the rest, so a
burst and an idle last one step. Nothing here is learned per model: a family never trained on
is placed as well as one that was.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

#: Sampled points kept per step (the forward's plateaus merged; beyond this, evenly thinned).
MAX_POINTS = 400

#: What an op's bytes cost against a streaming copy of as many bytes at the machine's copy
#: bandwidth: eager elementwise and layout ops move their bytes at about two thirds of it.
#: Chosen on ``cpu-ddp-w2-lo``'s held-out families (1, 1.25, 1.5, 1.75, 2, 2.5 tried; the share
#: error 0.0353 -> 0.0343 at 1.5), then applied to every setting (``docs/memory.md``).
BYTES_WEIGHT = 1.5

#: Optimizer kinds of the tail fit: plain SGD touches a parameter's bytes about twice, the Adam
#: family about four times (two moments), so each has its own coefficient.
TAIL_KINDS = ("sgd", "adam")


@dataclass
class MemoryCycle:
    """The simulated memory level of one worker's step at the collector's sample points.

    ``flops``/``bytes``: the forward-and-backward FLOPs and bytes done up to each point
    (cumulative), ``levels``: the transient bytes there; ``total_flops``/``total_bytes``: of the
    whole forward and backward; ``tail_bytes``: held after the backward pass until the next
    step starts; ``end_bytes``: held at the step's very end (the tail's and what arrives
    then); ``param_bytes``: parameter bytes the optimizer updates, ``optimizer``: its kind
    (:data:`TAIL_KINDS`); ``last_message_bytes``: the strategy's last message of the step (its
    communication's last entry, :mod:`driple.graph.comm`); ``comm_calls``/``comm_bytes``: the
    blocking collectives a sharded worker waited in before each point (count, and their units'
    bytes; :mod:`driple.graph.sharded_cycle`), ``total_comm_calls``/``total_comm_bytes``: in
    the whole forward and backward (none for other strategies: their communication overlaps
    the backward pass or follows it, in the tail)."""

    flops: np.ndarray
    bytes: np.ndarray
    levels: np.ndarray
    total_flops: float
    total_bytes: float
    tail_bytes: float
    param_bytes: float
    optimizer: str = "sgd"
    last_message_bytes: float = 0.0
    end_bytes: float = 0.0
    comm_calls: Optional[np.ndarray] = None
    comm_bytes: Optional[np.ndarray] = None
    total_comm_calls: float = 0.0
    total_comm_bytes: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.levels)
        self.comm_calls = np.zeros(n) if self.comm_calls is None else np.asarray(self.comm_calls, dtype=np.float64)
        self.comm_bytes = np.zeros(n) if self.comm_bytes is None else np.asarray(self.comm_bytes, dtype=np.float64)

    def fb_seconds(self, flops_per_s: float, bytes_per_s: float) -> float:
        """Roofline seconds of the forward and backward pass on a machine of these rates."""
        return self.total_flops / flops_per_s + self.total_bytes / bytes_per_s

    def tail_features(self, flops_per_s: float, bytes_per_s: float) -> np.ndarray:
        """What :class:`TailFit` reads: the parameter bytes per forward-and-backward second of
        each optimizer kind, the last message's bytes per second (both in copy-seconds), and 1."""
        fb = max(self.fb_seconds(flops_per_s, bytes_per_s), 1e-12)
        per = self.param_bytes / bytes_per_s / fb
        return np.array([per if self.optimizer == k else 0.0 for k in TAIL_KINDS]
                        + [self.last_message_bytes / bytes_per_s / fb, 1.0])

    def comm_features(self, flops_per_s: float, bytes_per_s: float) -> np.ndarray:
        """What :class:`TailFit`'s collective weights multiply: the blocking collectives per
        forward-and-backward second, their bytes per second (in copy-seconds), and the step's
        first collective, where the ranks meet (the wait for the slower one), per second."""
        fb = max(self.fb_seconds(flops_per_s, bytes_per_s), 1e-12)
        return np.array([self.total_comm_calls / fb, self.total_comm_bytes / bytes_per_s / fb,
                         float(self.total_comm_calls > 0) / fb])

    def burst_fraction(self, tail: float, flops_per_s: float, bytes_per_s: float,
                       comm: Sequence[float] = (0.0, 0.0, 0.0)) -> float:
        """The share of the step the level is above its midpoint, when ``tail`` of the step
        comes after the backward pass (the step starts at the resting level) and each blocking
        collective takes ``comm[0]`` roofline-seconds plus ``comm[1]`` times its copy-seconds,
        and the first one ``comm[2]`` more (its third weight, where given)."""
        times, levels, midpoint = self.placed(tail, flops_per_s, bytes_per_s, comm)
        if midpoint is None:
            return 0.0
        spans = np.diff(times)
        return float(np.clip(spans[levels > midpoint].sum(), 0.0, 1.0))

    def placed(self, tail: float, flops_per_s: float, bytes_per_s: float,
               comm: Sequence[float] = (0.0, 0.0, 0.0)) -> tuple:
        """``(times, levels, midpoint)``: the step as :meth:`burst_fraction` reads it, each level
        holding from its time (a share of the step) to the next, the last until 1; ``levels``
        above the resting level at the step's start; ``midpoint`` None where the level never
        rises."""
        tail = float(np.clip(tail, 0.0, 0.95))
        per_call, per_byte, first = (list(comm) + [0.0, 0.0, 0.0])[:3]

        def elapsed(flops, nbytes, calls, sent):  # at each point, and for the whole pass
            return (flops / flops_per_s + nbytes / bytes_per_s + per_call * calls
                    + per_byte * sent / bytes_per_s + first * (calls > 0))

        cost = elapsed(self.flops, self.bytes, self.comm_calls, self.comm_bytes)
        total = elapsed(self.total_flops, self.total_bytes, self.total_comm_calls, self.total_comm_bytes)
        at = (cost / total if total > 0 else np.linspace(0, 1, len(cost))) * (1 - tail)
        times = np.concatenate([[0.0], at, [1 - tail, 1.0]])
        levels = np.concatenate([[0.0], self.levels, [self.tail_bytes]])
        low, peak = levels.min(), max(levels.max(), self.end_bytes)
        return times, levels, ((low + peak) / 2 if peak > low else None)

    def to_dict(self) -> dict:
        return {"flops": [float(v) for v in self.flops], "bytes": [float(v) for v in self.bytes],
                "levels": [float(v) for v in self.levels], "total_flops": float(self.total_flops),
                "total_bytes": float(self.total_bytes), "tail_bytes": float(self.tail_bytes),
                "param_bytes": float(self.param_bytes), "optimizer": self.optimizer,
                "last_message_bytes": float(self.last_message_bytes), "end_bytes": float(self.end_bytes),
                **({"comm_calls": [float(v) for v in self.comm_calls], "comm_bytes": [float(v) for v in self.comm_bytes],
                    "total_comm_calls": float(self.total_comm_calls), "total_comm_bytes": float(self.total_comm_bytes)}
                   if self.total_comm_calls else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "MemoryCycle":
        return cls(np.asarray(d["flops"], dtype=np.float64), np.asarray(d["bytes"], dtype=np.float64),
                   np.asarray(d["levels"], dtype=np.float64), float(d["total_flops"]),
                   float(d["total_bytes"]), float(d["tail_bytes"]), float(d["param_bytes"]),
                   str(d.get("optimizer", "sgd")), float(d.get("last_message_bytes", 0.0)),
                   float(d.get("end_bytes", 0.0)), d.get("comm_calls"), d.get("comm_bytes"),
                   float(d.get("total_comm_calls", 0.0)), float(d.get("total_comm_bytes", 0.0)))


def optimizer_kind(name: str) -> str:
    """:data:`TAIL_KINDS` of an optimizer name: ``adam`` for the Adam family, else ``sgd``."""
    return "adam" if "adam" in str(name).lower() else "sgd"


def _op_costs(nodes) -> tuple[np.ndarray, np.ndarray]:
    """Per node: FLOPs (torch's formula; none for an input) and bytes read plus written."""
    flops = np.array([0.0 if n.op == "placeholder" else float(n.flops) for n in nodes])
    moved = np.array([0.0 if n.op == "placeholder" else float(
        n.out_bytes + sum(getattr(s, "out_bytes", 0) for s in n.all_input_nodes)) for n in nodes])
    return flops, moved


def _thinned(keep: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """At most :data:`MAX_POINTS` of the positions ``keep``, the highest level always kept."""
    if len(keep) <= MAX_POINTS:
        return keep
    pick = np.unique(np.concatenate([np.linspace(0, len(keep) - 1, MAX_POINTS - 1).round().astype(int),
                                     [int(np.argmax(levels[keep]))]]))
    return keep[pick]


def memory_cycle(traced, strategy: str = "ddp", workers: int = 2, optimizer: Optional[str] = None,
                 parts: Optional[dict] = None, comm: Sequence[dict] = ()) -> MemoryCycle:
    """The :class:`MemoryCycle` of one worker of ``strategy`` among ``workers`` for a traced step
    (:class:`~driple.graph.trace.TracedStep`); ``parts``: the simulator's walk of the step for
    them (:func:`driple.graph.memory.step_parts`) when already made; ``comm``: the strategy's
    messages in order (``[{"params", "bytes"}, ...]``, what its ``add_comm`` returns)."""
    from driple.graph.memory import step_parts
    from driple.strategies import worker_memory

    p = parts if parts is not None else step_parts(traced, strategy, workers)
    nodes = list(traced.graph_module.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    live = np.asarray(p["live"], dtype=np.float64)
    loss = position.get(traced.loss_node, len(nodes) - 1)
    forward = np.minimum.accumulate(live[: loss + 1][::-1])[::-1]  # the level it stays above
    grads = sorted({position[g] for g in p["grads"] if g in position and position[g] > loss})
    flops, moved = _op_costs(nodes)
    cum_f, cum_b = np.cumsum(flops), np.cumsum(moved)
    # forward: one point per plateau (where the level changes), then each gradient's accumulation
    change = np.flatnonzero(np.diff(np.concatenate([[-1.0], forward])) != 0)
    fwd = _thinned(change, forward)
    declared = worker_memory(strategy)
    calls = sent = None
    if declared.sharded and declared.sample_points:  # read around its collectives: its own walk
        from driple.strategies.registry import resolve_function

        units = resolve_function(declared.units)(list(traced.param_names))
        walk = resolve_function(declared.sample_points)(traced, units, workers, forward, live, loss, fwd)
        points = np.array([w[0] for w in walk], dtype=int)
        levels, calls, sent = (np.array([w[k] for w in walk], dtype=np.float64) for k in (1, 2, 3))
    else:
        bwd = _thinned(np.asarray(grads, dtype=int), live) if grads else np.zeros(0, dtype=int)
        points = np.concatenate([fwd, bwd]).astype(int)
        levels = np.concatenate([forward[fwd], live[bwd]]) + p["gathered"]
    last = max(int(points.max()) if len(points) else loss, loss)
    tail = float(p["grad_bytes"] + traced.loss_node.out_bytes)  # the loss lives until the step returns
    return MemoryCycle(cum_f[points], cum_b[points], levels, float(cum_f[last]), float(cum_b[last]),
                       tail, float(sum(traced.param_bytes)),
                       optimizer_kind(optimizer if optimizer is not None else getattr(traced, "optimizer", "")),
                       float(comm[-1]["bytes"]) if comm else 0.0, tail + float(p["comm_after_backward"]),
                       calls, sent, float(calls[-1]) if calls is not None and len(calls) else 0.0,
                       float(sent[-1]) if sent is not None and len(sent) else 0.0)


def _fraction_fit(x: np.ndarray, phi: np.ndarray, tails: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Non-negative weights ``w`` whose share of the step in collectives, ``r (1 - tail) / (1 +
    r)`` with ``r = x·w``, is least-squares closest to the measured ``phi``, from ``start`` (the
    fit of the ratio ``r`` itself). The ratio's fit is pulled by the jobs that spend most of
    their step waiting and left every FSDP family's share 0.02-0.15 short (mean 0.05 on
    loopback, 0.06 at 1 Gbit/s); fitted on the share, the mean error is 0.01 and less."""
    from scipy.optimize import least_squares

    def residual(w):
        r = x @ w
        return r * (1 - tails) / (1 + r) - phi

    fit = least_squares(residual, np.maximum(start, 1e-12), bounds=(0.0, np.inf), x_scale="jac")
    return fit.x if fit.success and np.all(np.isfinite(fit.x)) else start


@dataclass
class TailFit:
    """The share of a step after the backward pass: ``r = tail / (1 - tail)`` is
    ``coef · MemoryCycle.tail_features``, non-negative least squares on measured tails
    (:func:`driple.collect.labels.timeline.tail_fraction`) at the measuring machine's rates.
    For a sharded worker also the time of its blocking collectives: ``comm`` (roofline-seconds
    per collective, a multiple of its copy-seconds, and roofline-seconds more at the step's
    first collective, where the ranks wait for each other), non-negative least squares of the
    measured share of the step in them (:func:`_fraction_fit`; started from the fit of that
    time per forward-and-backward compute time, :func:`~driple.collect.labels.timeline.comm_fraction`,
    on :meth:`MemoryCycle.comm_features`)."""

    coef: list = field(default_factory=lambda: [0.0] * (len(TAIL_KINDS) + 2))
    fitted_on: str = ""
    comm: list = field(default_factory=lambda: [0.0, 0.0, 0.0])
    bytes_weight: float = 1.0  # a fit from before BYTES_WEIGHT reads as it was made

    @classmethod
    def fit(cls, cycles: Sequence[MemoryCycle], tails: Sequence[float], flops_per_s: float,
            bytes_per_s: float, fitted_on: str = "", comm_fractions: Optional[Sequence[float]] = None,
            bytes_weight: float = BYTES_WEIGHT) -> "TailFit":
        from scipy.optimize import nnls

        from driple.errors import DripleError

        bytes_per_s = bytes_per_s / bytes_weight  # an op's bytes at its effective rate, everywhere below
        tails = np.asarray(tails, dtype=np.float64)
        ok = np.isfinite(tails) & (tails >= 0) & (tails < 1)
        if ok.sum() < len(TAIL_KINDS) + 2:
            raise DripleError(f"a tail fit needs at least {len(TAIL_KINDS) + 2} jobs with a measured "
                              f"tail, got {int(ok.sum())}")
        x = np.array([c.tail_features(flops_per_s, bytes_per_s) for c, k in zip(cycles, ok) if k])
        coef, _ = nnls(x, tails[ok] / (1 - tails[ok]))
        comm = [0.0, 0.0, 0.0]
        if comm_fractions is not None:
            phi = np.asarray(comm_fractions, dtype=np.float64)
            rest = 1 - phi - tails
            use = ok & np.isfinite(phi) & (rest > 0) & np.array([c.total_comm_calls > 0 for c in cycles])
            if use.sum() >= 3:
                xc = np.array([c.comm_features(flops_per_s, bytes_per_s) for c, k in zip(cycles, use) if k])
                start = nnls(xc, phi[use] / rest[use])[0]
                comm = [float(v) for v in _fraction_fit(xc, phi[use], tails[use], start)]
        return cls([float(v) for v in coef], fitted_on, comm, float(bytes_weight))

    def tail(self, cycle: MemoryCycle, flops_per_s: float, bytes_per_s: float) -> float:
        r = float(np.dot(self.coef, cycle.tail_features(flops_per_s, bytes_per_s / self.bytes_weight)))
        return r / (1 + r)

    def burst_fraction(self, cycle: MemoryCycle, flops_per_s: float, bytes_per_s: float) -> float:
        return cycle.burst_fraction(self.tail(cycle, flops_per_s, bytes_per_s), flops_per_s,
                                    bytes_per_s / self.bytes_weight, self.comm)

    def placed(self, cycle: MemoryCycle, flops_per_s: float, bytes_per_s: float) -> tuple:
        """:meth:`MemoryCycle.placed` as :meth:`burst_fraction` places ``cycle``: ``(times,
        levels, midpoint)``."""
        return cycle.placed(self.tail(cycle, flops_per_s, bytes_per_s), flops_per_s,
                            bytes_per_s / self.bytes_weight, self.comm)

    def to_dict(self) -> dict:
        return {"coef": list(self.coef), "features": [f"{k}_param_bytes_per_fb_second" for k in TAIL_KINDS]
                + ["last_message_bytes_per_fb_second", "1"],
                "comm": list(self.comm), "comm_features": ["collectives_per_fb_second", "collective_bytes_per_fb_second",
                                                           "first_collective_per_fb_second"],
                "bytes_weight": float(self.bytes_weight), "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, d: dict) -> "TailFit":
        comm = [float(v) for v in d.get("comm", (0.0, 0.0, 0.0))]
        if len(comm) not in (2, 3):
            raise ValueError(f"'comm' holds {len(comm)} weights, not 3 (per collective, per byte, the first)")
        weight = float(d.get("bytes_weight", 1.0))
        if not np.isfinite(weight) or weight <= 0:
            raise ValueError(f"'bytes_weight' is {weight}, not a positive number")
        return cls([float(v) for v in d["coef"]], str(d.get("fitted_on", "")), comm, weight)
