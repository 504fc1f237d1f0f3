"""Co-location arithmetic: what happens to a resource when jobs share a device, a host or a link.

Each :class:`~driple.predict.profile.ResourceProfile` is one worker's two-level square wave per
resource (burst level ``b`` for a share ``d`` of the time — the duty cycle — else the idle level
``a``). For jobs sharing a resource of capacity ``C`` (same unit as the burst amounts):

- **combined mean load** = sum of the jobs' mean loads; it must stay below ``C`` or the jobs
  slow down whatever their phases;
- **burst collision probability** = share of time two or more jobs are in burst at once. With
  independent, uniformly random phases a job is in burst at a random instant with probability
  ``d_i``, independently of the others, so for two jobs it is ``d1 * d2`` and for n jobs
  ``1 - prod(1 - d_i) - sum_i d_i prod_{j != i} (1 - d_j)``;
- **overload probability** = share of time the summed instantaneous demand exceeds ``C``,
  summed exactly over the ``2^n`` burst/idle states under the same independence; and the
  **expected excess** = mean of ``max(0, demand - C)`` (demand that has to wait, same unit).

Assumptions: phases independent and uniformly random (jobs started at unrelated times; periods
need not match), each job's pattern unchanged by its neighbours (no slowdown feedback), and
the profile assumptions of :mod:`driple.predict.profile` (idle level 0 except memory on CPU
hosts). A profile stands for one worker; the workers of one synchronous job burst *together*,
so do not pass them as independent jobs.

Capacities (:func:`host_capacity` builds them): compute 100 x cores on a CPU host (profiles are
% of one core) or 100 x GPUs on a GPU host, memory 100 (% of host memory), TX/RX the link rate
in MB/s. A resource left out of ``capacity`` gets mean loads and collisions, no overload.

:func:`measured_combined` computes the same quantities from series measured while jobs really
ran together, to check these predictions.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np

from driple.errors import DripleError
from driple.metrics import RESOURCES, UNITS
from driple.predict.profile import ResourceProfile

MAX_JOBS = 16  # exact overload over 2^n states; 65,536 states x 4 resources is still instant
MAX_OVERLOAD = 0.05  # default: a pair "packs well" when no resource is overloaded > 5% of the time
VERDICTS = ("packs well", "contends", "does not fit")  # best first


def host_capacity(cores: float | None = None, link_mb_s: float | None = None, memory_pct: float = 100.0) -> dict:
    """Capacity dict for :func:`colocate`.

    ``cores``: CPU cores (CPU hosts) or GPUs (GPU hosts) the jobs share -> compute = 100 x cores
    (%); ``link_mb_s``: link rate in MB/s (1 Gbit/s = 125 MB/s) -> TX and RX; ``memory_pct``:
    memory capacity in % of host memory. Left-out resources (None) are not checked for overload.
    """
    cap = {}
    if cores is not None:
        cap["compute"] = 100.0 * float(cores)
    cap["memory"] = float(memory_pct)
    if link_mb_s is not None:
        cap["tx"] = cap["rx"] = float(link_mb_s)
    return _check_capacity(cap)


def collision_probability(duty_cycles: Sequence[float]) -> float:
    """P(two or more in burst) for independent jobs in burst with probabilities ``duty_cycles``:
    ``1 - prod(1 - d_i) - sum_i d_i prod_{j != i} (1 - d_j)``."""
    # accumulated job by job as P(none), P(exactly one), P(two or more): the same number without
    # the cancellation of 1 - ... (one job gives exactly 0, not 1e-17)
    none, one, many = 1.0, 0.0, 0.0
    for d in np.clip(np.asarray(duty_cycles, dtype=np.float64).ravel(), 0.0, 1.0):
        none, one, many = none * (1 - d), one * (1 - d) + none * d, many + one * d
    return float(many)


def _states(burst: np.ndarray, idle: np.ndarray, duty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All 2^n burst/idle states: (probability of each, summed demand of each)."""
    n = len(duty)
    if n > MAX_JOBS:
        raise DripleError(f"overload is summed over 2^n states; {n} jobs is more than {MAX_JOBS}")
    bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1  # [2^n, n], 1 = burst
    prob = np.prod(np.where(bits == 1, duty, 1.0 - duty), axis=1)
    demand = bits @ burst + (1 - bits) @ idle
    return prob, demand


def overload_probability(burst_levels, duty_cycles, capacity: float, idle_levels=None) -> float:
    """Share of time the summed demand exceeds ``capacity`` (independent phases, exact over 2^n
    states). ``idle_levels`` default to 0."""
    b = np.asarray(burst_levels, dtype=np.float64)
    a = np.zeros_like(b) if idle_levels is None else np.asarray(idle_levels, dtype=np.float64)
    d = np.clip(np.asarray(duty_cycles, dtype=np.float64), 0.0, 1.0)
    prob, demand = _states(b, a, d)
    return float(prob[demand > _over(capacity)].sum())


def _over(capacity: float) -> float:
    # demand equal to capacity (up to rounding) is not an overload
    return float(capacity) + 1e-9 * max(1.0, abs(float(capacity)))


@dataclass
class ResourceLoad:
    """One resource shared by the jobs (amounts in the resource's unit).

    ``utilisation`` = combined mean / capacity; ``peak_demand`` = all jobs in burst at once;
    ``overload_probability`` / ``expected_excess``: None without a capacity.
    """

    resource: str
    unit: str
    combined_mean: float
    peak_demand: float
    collision_probability: float
    duty_cycles: dict
    mean_loads: dict
    capacity: float | None = None
    utilisation: float | None = None
    overload_probability: float | None = None
    expected_excess: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ColocationReport:
    """Jobs sharing a device/host/link: per-resource loads, a verdict and its reason.

    ``verdict`` is one of ``VERDICTS``: *does not fit* when a combined mean load exceeds its
    capacity; else *contends* when some resource is overloaded more than ``max_overload`` of the
    time; else *packs well*. ``worst_resource`` is the resource that decided it.
    """

    jobs: list
    capacity: dict
    resources: dict
    verdict: str
    reason: str
    worst_resource: str | None
    max_overload: float = MAX_OVERLOAD

    @property
    def worst_overload(self) -> float:
        """Largest overload probability over the resources with a capacity (0 without any)."""
        vals = [r.overload_probability for r in self.resources.values() if r.overload_probability is not None]
        return max(vals, default=0.0)

    @property
    def worst_utilisation(self) -> float:
        """Largest combined mean / capacity (0 without any capacity)."""
        vals = [r.utilisation for r in self.resources.values() if r.utilisation is not None]
        return max(vals, default=0.0)

    def to_dict(self) -> dict:
        return {
            "jobs": list(self.jobs),
            "capacity": dict(self.capacity),
            "verdict": self.verdict,
            "reason": self.reason,
            "worst_resource": self.worst_resource,
            "max_overload": self.max_overload,
            "worst_overload": self.worst_overload,
            "worst_utilisation": self.worst_utilisation,
            "resources": {r: load.to_dict() for r, load in self.resources.items()},
        }


@dataclass
class PairScore:
    """How well two jobs pack; :func:`rank_pairs` sorts by ``(verdict, worst overload, worst
    utilisation)``, best first."""

    jobs: tuple
    verdict: str
    reason: str
    worst_overload: float
    worst_utilisation: float
    report: ColocationReport = field(repr=False)

    @property
    def sort_key(self) -> tuple:
        return (VERDICTS.index(self.verdict), self.worst_overload, self.worst_utilisation, self.jobs)

    def to_dict(self) -> dict:
        return {
            "jobs": list(self.jobs),
            "verdict": self.verdict,
            "reason": self.reason,
            "worst_overload": self.worst_overload,
            "worst_utilisation": self.worst_utilisation,
            "report": self.report.to_dict(),
        }


def colocate(profiles, capacity: Mapping, max_overload: float = MAX_OVERLOAD) -> ColocationReport:
    """Combined load, burst collisions and overload of 2 or more jobs sharing ``capacity``.

    ``profiles``: a list of :class:`ResourceProfile` (named by their ``model``, duplicates
    numbered) or ``{name: profile}``. ``capacity``: ``{resource: capacity}`` in the resources'
    units (see :func:`host_capacity`). ``max_overload``: share of time a resource may be
    overloaded and still "pack well".
    """
    named = _named(profiles)
    cap = _check_capacity(capacity)
    if not 0.0 <= max_overload <= 1.0:
        raise DripleError(f"max_overload is a share of time in [0, 1], got {max_overload}")
    devices = {p.device for p in named.values()}
    if len(devices) > 1:
        raise DripleError(
            "cannot add the compute of CPU-host profiles (% of a core) to GPU-host ones (% GPU): "
            f"the profiles' settings mix devices {sorted(devices)}"
        )
    names = list(named)
    loads = {}
    for r in RESOURCES:
        shapes = [named[n].shape(r) for n in names]
        b = np.array([s.burst_amount for s in shapes])
        a = np.array([s.idle_level for s in shapes])
        d = np.array([s.duty_cycle for s in shapes])
        means = {n: s.mean_load for n, s in zip(names, shapes)}
        load = ResourceLoad(
            resource=r,
            unit=UNITS[r],
            combined_mean=float(sum(means.values())),
            peak_demand=float(np.maximum(a, b).sum()),
            collision_probability=collision_probability(d),
            duty_cycles={n: float(x) for n, x in zip(names, d)},
            mean_loads=means,
        )
        if r in cap:
            prob, demand = _states(b, a, d)
            load.capacity = cap[r]
            load.utilisation = load.combined_mean / cap[r]
            load.overload_probability = float(prob[demand > _over(cap[r])].sum())
            load.expected_excess = float((prob * np.clip(demand - cap[r], 0.0, None)).sum())
        loads[r] = load
    verdict, reason, worst = _judge(loads, max_overload)
    return ColocationReport(jobs=names, capacity=cap, resources=loads, verdict=verdict, reason=reason,
                            worst_resource=worst, max_overload=max_overload)


def rank_pairs(profiles, capacity: Mapping, max_overload: float = MAX_OVERLOAD) -> list:
    """Every pair of jobs as a :class:`PairScore`, best-packing first (see :class:`ColocationReport`
    for the rule)."""
    named = _named(profiles)
    out = []
    for x, y in itertools.combinations(named, 2):
        rep = colocate({x: named[x], y: named[y]}, capacity, max_overload=max_overload)
        out.append(PairScore(jobs=(x, y), verdict=rep.verdict, reason=rep.reason,
                             worst_overload=rep.worst_overload, worst_utilisation=rep.worst_utilisation,
                             report=rep))
    return sorted(out, key=lambda p: p.sort_key)


def _judge(loads: dict, max_overload: float) -> tuple[str, str, str | None]:
    checked = [ld for ld in loads.values() if ld.capacity is not None]
    if not checked:
        return "packs well", "no capacity given: nothing to overload", None
    over = [ld for ld in checked if ld.combined_mean > _over(ld.capacity)]
    if over:
        w = max(over, key=lambda ld: ld.utilisation)
        return "does not fit", (
            f"does not fit: combined mean {w.resource} {_amt(w.combined_mean, w.unit)} exceeds its "
            f"capacity {_amt(w.capacity, w.unit)} ({_pc(w.utilisation)}), so the jobs slow down whatever "
            "their phases"
        ), w.resource
    w = max(checked, key=lambda ld: (ld.overload_probability, ld.utilisation))
    u = max(checked, key=lambda ld: ld.utilisation)
    mean_txt = f"mean load at most {_pc(u.utilisation)} of capacity ({u.resource})"
    if w.overload_probability > max_overload:
        return "contends", (
            f"contends: {w.resource} demand exceeds {_amt(w.capacity, w.unit)} {_pc(w.overload_probability)} "
            f"of the time (bursts collide {_pc(w.collision_probability)}); {mean_txt}"
        ), w.resource
    if w.overload_probability > 0:
        tail = f"worst {w.resource} overloaded {_pc(w.overload_probability)} of the time"
    else:
        c = max(checked, key=lambda ld: ld.collision_probability)
        tail = f"no resource is ever overloaded (bursts collide at most {_pc(c.collision_probability)}, {c.resource})"
    return "packs well", f"packs well: {tail}; {mean_txt}", w.resource


def _named(profiles) -> dict:
    if isinstance(profiles, Mapping):
        named = {str(k): v for k, v in profiles.items()}
    else:
        named = {}
        for p in profiles:
            base = getattr(p, "model", None) or "job"
            name, k = base, 2
            while name in named:
                name, k = f"{base} #{k}", k + 1
            named[name] = p
    if len(named) < 2:
        raise DripleError(f"co-location needs at least 2 jobs, got {len(named)}")
    bad = [n for n, p in named.items() if not isinstance(p, ResourceProfile)]
    if bad:
        raise DripleError(f"not ResourceProfile objects: {bad}")
    return named


def _check_capacity(capacity: Mapping) -> dict:
    if not isinstance(capacity, Mapping):
        raise DripleError("capacity must be a {resource: capacity} dict, e.g. host_capacity(cores=2, link_mb_s=125)")
    bad = [r for r in capacity if r not in RESOURCES]
    if bad:
        raise DripleError(f"capacity for unknown resource(s) {bad}; use {list(RESOURCES)}")
    out = {}
    for r in RESOURCES:
        if r in capacity and capacity[r] is not None:
            c = float(capacity[r])
            if not (np.isfinite(c) and c > 0):
                raise DripleError(f"capacity of {r} must be a positive number, got {capacity[r]!r}")
            out[r] = c
    return out


def _pc(x: float) -> str:
    p = 100 * x
    return f"{p:.1f}%" if 0 < p < 1 else f"{p:.0f}%"


def _amt(x: float, unit: str) -> str:
    return f"{x:.3g}%" if unit == "%" else f"{x:.3g} {unit}"


# ----- measured co-runs -----


@dataclass
class MeasuredLoad:
    """One resource of jobs measured running together, on a common time grid.

    ``collision_fraction``: share of grid points where two or more jobs are above their own
    burst threshold; ``independent_collision``: what :func:`collision_probability` predicts from
    the measured duty cycles (a gap between the two means the phases were not independent).
    """

    resource: str
    unit: str
    combined_mean: float
    collision_fraction: float
    independent_collision: float
    duty_cycles: dict
    mean_loads: dict
    thresholds: dict
    capacity: float | None = None
    utilisation: float | None = None
    overload_fraction: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class MeasuredColocation:
    """:func:`measured_combined` result: the window (s), grid step (s) and per-resource loads."""

    jobs: list
    window_s: tuple
    dt_s: float
    n_samples: int
    resources: dict

    def to_dict(self) -> dict:
        return {"jobs": list(self.jobs), "window_s": list(self.window_s), "dt_s": self.dt_s,
                "n_samples": self.n_samples,
                "resources": {r: load.to_dict() for r, load in self.resources.items()}}


def measured_combined(series_by_job: Mapping, capacity: Mapping | None = None, thresholds: Mapping | None = None,
                      *, t0: float | None = None, t1: float | None = None, dt: float | None = None,
                      random_state: int | None = 0) -> MeasuredColocation:
    """Combined mean load, collision and overload fractions of jobs *measured* running together.

    ``series_by_job``: ``{job: {resource: (t, values)}}`` with ``t`` in s on a clock shared by
    the jobs, or ``{job: DataFrame}`` as returned by :meth:`RawSeries.rates` (index t, columns
    compute, memory, tx, rx). A value at ``t[k]`` is the rate over ``(t[k-1], t[k]]``, so every
    series is read on a common grid of step ``dt`` (default: the smallest median sampling step)
    over the time all jobs were measured (cut to ``[t0, t1]`` when given, e.g. the steady state).

    ``thresholds``: ``{job: {resource: value}}``, a sample above it is in burst. Missing ones
    are fitted per job and resource on its own samples in the window by the burst/idle labeller
    (:class:`driple.collect.labeller.BurstIdleLabeller`, 2-means, midpoint of the centres).
    ``capacity``: as in :func:`colocate`, for the overload fraction.
    """
    if not isinstance(series_by_job, Mapping) or len(series_by_job) < 2:
        raise DripleError("measured_combined needs {job: series} for at least 2 jobs")
    cap = _check_capacity(capacity or {})
    thresholds = thresholds or {}
    jobs = [str(j) for j in series_by_job]
    data = {str(j): _as_series(s, str(j)) for j, s in series_by_job.items()}
    resources = [r for r in RESOURCES if all(r in data[j] for j in jobs)]
    if not resources:
        raise DripleError(f"the jobs share no resource series; each needs some of {list(RESOURCES)}")

    lo = max(data[j][r][0][0] for j in jobs for r in resources)
    hi = min(data[j][r][0][-1] for j in jobs for r in resources)
    if t0 is not None:
        lo = max(lo, float(t0))
    if t1 is not None:
        hi = min(hi, float(t1))
    if dt is None:
        steps = [np.median(np.diff(data[j][r][0])) for j in jobs for r in resources if len(data[j][r][0]) > 1]
        dt = float(min(steps)) if steps else 0.0
    if not dt > 0:
        raise DripleError(f"the grid step dt must be positive, got {dt}")
    n = int(np.floor((hi - lo) / dt + 1e-9))
    if n < 2:
        raise DripleError(
            f"the jobs were measured together for {max(hi - lo, 0.0):.3g} s only (window {lo:.3g}..{hi:.3g} s): "
            "too short, or their clocks are not shared"
        )
    grid = lo + dt * (np.arange(n) + 0.5)

    out = {}
    for r in resources:
        values, above, thr_of = {}, {}, {}
        for j in jobs:
            t, v = data[j][r]
            on_grid = v[np.minimum(np.searchsorted(t, grid, side="left"), len(t) - 1)]
            thr = (thresholds.get(j) or {}).get(r)
            if thr is None:
                inside = (t > lo) & (t <= hi + dt)
                thr = _fit_threshold(t[inside], v[inside], r, random_state) if inside.sum() >= 2 else np.inf
            thr_of[j] = float(thr)
            values[j] = on_grid
            above[j] = on_grid > thr
        total = np.sum([values[j] for j in jobs], axis=0)
        count = np.sum([above[j] for j in jobs], axis=0)
        duty = {j: float(above[j].mean()) for j in jobs}
        load = MeasuredLoad(
            resource=r,
            unit=UNITS[r],
            combined_mean=float(total.mean()),
            collision_fraction=float((count >= 2).mean()),
            independent_collision=collision_probability(list(duty.values())),
            duty_cycles=duty,
            mean_loads={j: float(values[j].mean()) for j in jobs},
            thresholds=thr_of,
        )
        if r in cap:
            load.capacity = cap[r]
            load.utilisation = load.combined_mean / cap[r]
            load.overload_fraction = float((total > _over(cap[r])).mean())
        out[r] = load
    return MeasuredColocation(jobs=jobs, window_s=(float(lo), float(hi)), dt_s=float(dt), n_samples=n,
                              resources=out)


def _as_series(s, job: str) -> dict:
    """``{resource: (t, values)}`` with NaNs dropped and t sorted, from a dict or a DataFrame."""
    if hasattr(s, "columns") and hasattr(s, "index"):
        t = np.asarray(s.index, dtype=np.float64)
        s = {c: (t, s[c].to_numpy(dtype=np.float64)) for c in s.columns if c in RESOURCES}
    if not isinstance(s, Mapping):
        raise DripleError(f"series of job {job!r} must be {{resource: (t, values)}} or a rates DataFrame")
    out = {}
    for r, tv in s.items():
        if r not in RESOURCES:
            continue
        t, v = (np.asarray(x, dtype=np.float64).ravel() for x in tv)
        if len(t) != len(v):
            raise DripleError(f"job {job!r} {r}: {len(t)} times for {len(v)} values")
        ok = np.isfinite(t) & np.isfinite(v)
        t, v = t[ok], v[ok]
        if len(t) == 0:
            raise DripleError(f"job {job!r} has no valid {r} samples")
        order = np.argsort(t, kind="stable")
        out[r] = (t[order], v[order])
    return out


def _fit_threshold(t: np.ndarray, v: np.ndarray, resource: str, random_state) -> float:
    from driple.collect.labeller import MIN_GAP, BurstIdleLabeller, sample_durations

    w = sample_durations(t)
    w = np.where(w > 0, w, w[0] if w[0] > 0 else 1.0)  # repeated timestamps: one median step
    lab = BurstIdleLabeller(random_state=random_state, min_gap=MIN_GAP[resource]).fit(v, w)
    return float(lab.threshold_)
