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
hosts). A profile's ``resident`` amounts (the runtime's part of a worker's memory, which the
memory label leaves out) are added to both of its levels: a host holds resident sets. A profile
stands for one worker; the workers of one synchronous job burst *together*, so do not pass them
as independent jobs.

Capacities (:func:`host_capacity` builds them): compute 100 x cores on a CPU host (profiles are
% of one core) or 100 x GPUs on a GPU host, memory 100 (% of host memory; the host's MB when
the memory amount is in MB, labels v2), TX/RX the link rate in MB/s. A resource left out of ``capacity`` gets mean loads and collisions, no overload.

:func:`driple.collect.corun.measured_combined` computes the same quantities from series measured
while jobs really ran together, to check these predictions.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from driple.errors import DripleError
from driple.metrics import resource, resources
from driple.predict.formatting import format_amount, format_percent
from driple.predict.profile import ResourceProfile
from driple.sharing import SharedLoad, check_capacity, collision_probability, overload_level

MAX_JOBS = 16  # exact overload over 2^n states; 65,536 states x 4 resources is still instant
MAX_OVERLOAD = 0.05  # default: a pair "packs well" when no resource is overloaded > 5% of the time
VERDICTS = ("packs well", "contends", "does not fit", "cannot run")  # best first


def host_capacity(cores: float | None = None, link_mb_s: float | None = None, memory_pct: float = 100.0,
                  memory_mb: float | None = None) -> dict:
    """Capacity dict for :func:`colocate`.

    ``cores``: CPU cores (CPU hosts) or GPUs (GPU hosts) the jobs share -> compute = 100 x cores
    (%); ``link_mb_s``: link rate in MB/s (1 Gbit/s = 125 MB/s) -> TX and RX; ``memory_pct``:
    memory capacity in % of host memory, or ``memory_mb`` in MB, whichever unit the memory
    amount is declared in (labels v1: %, v2: MB). Left-out resources (None) are not checked for
    overload.
    """
    def memory(unit: str):
        if unit == "%":
            return float(memory_pct)
        return None if memory_mb is None else float(memory_mb)

    amounts = {"cores": None if cores is None else 100.0 * float(cores),
               "link": None if link_mb_s is None else float(link_mb_s)}
    # each resource's capacity is counted in what its declaration says (driple.metrics)
    return check_capacity({r.name: memory(r.amount) if r.capacity == "memory" else amounts.get(r.capacity)
                           for r in resources()})


def ranks_per_host(setting_id: str) -> int:
    """Ranks of a job that share one host's cores and memory: all of them on loopback, one on
    each emulated host."""
    from driple.settings import parse_setting

    s = parse_setting(setting_id)
    return s.workers + s.servers if s.network == "lo" else 1


def slot_capacity(setting_id: str, cores=None, link_mbps=None, host_cores=None,
                  host_memory_mb=None) -> dict:
    """Capacity of one worker slot in the metrics' units: the metrics are per worker, and jobs
    co-located in a setting put one worker in each slot. On loopback the host's cores and
    memory are split between the setting's workers (2 workers on 2 cores: 1 core and 50 % of
    memory per slot); with emulated links each worker has its host's link to itself.
    ``host_memory_mb``: the host's memory for a memory amount in MB (default: this host's)."""
    import os

    import psutil

    from driple.settings import parse_setting

    s = parse_setting(setting_id)
    ranks_here = ranks_per_host(setting_id)
    host = host_cores or os.cpu_count() or 1
    slot_cores = cores if cores is not None else max(host / max(ranks_here, 1), 0.01)
    link = link_mbps if link_mbps is not None else (s.link_bps / 8e6 if s.link_bps else None)
    memory_mb = host_memory_mb if host_memory_mb is not None else psutil.virtual_memory().total / 1e6
    return host_capacity(cores=slot_cores, link_mb_s=link, memory_pct=100.0 / ranks_here,
                         memory_mb=memory_mb / ranks_here)


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
    return float(prob[demand > overload_level(capacity)].sum())


@dataclass(kw_only=True)
class ResourceLoad(SharedLoad):
    """One resource shared by the jobs, as predicted (fields of :class:`SharedLoad`, and):
    ``peak_demand`` = all jobs in burst at once; ``collision_probability`` under independent
    random phases; ``overload_probability`` / ``expected_excess``: None without a capacity.
    """

    peak_demand: float
    collision_probability: float
    overload_probability: float | None = None
    expected_excess: float | None = None


@dataclass
class ColocationReport:
    """Jobs sharing a device/host/link: per-resource loads, a verdict and its reason.

    ``verdict`` is one of ``VERDICTS``: *cannot run* when a job's own simulated memory peak
    exceeds its slot (its profile's ``memory``: it runs nowhere there, shared or not); *does not
    fit* when a combined mean load exceeds its capacity; else *contends* when some resource is overloaded more than ``max_overload`` of the
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
    cap = check_capacity(capacity)
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
    for r in (decl.name for decl in resources()):
        shapes = [named[n].shape(r) for n in names]
        held = np.array([(named[n].resident or {}).get(r, 0.0) for n in names])  # always held
        b = np.array([s.burst_amount for s in shapes]) + held
        a = np.array([s.idle_level for s in shapes]) + held
        d = np.array([s.duty_cycle for s in shapes])
        means = {n: s.mean_load + h for n, s, h in zip(names, shapes, held)}
        load = ResourceLoad(
            resource=r,
            unit=resource(r).amount,
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
            load.overload_probability = float(prob[demand > overload_level(cap[r])].sum())
            load.expected_excess = float((prob * np.clip(demand - cap[r], 0.0, None)).sum())
        loads[r] = load
    verdict, reason, worst = _judge(loads, max_overload)
    alone = [(n, named[n].memory) for n in names if (named[n].memory or {}).get("fits") is False]
    if alone:  # a job whose own simulated peak exceeds its slot runs nowhere, shared or not
        verdict, worst = "cannot run", "memory"
        reason = "; ".join(f"{n} alone needs {m['peak_mb']:.0f} MB, {m['exceeds_by_mb']:.0f} MB more than "
                           f"the {m['slot_mb']:.0f} MB of its slot" for n, m in alone)
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
    over = [ld for ld in checked if ld.combined_mean > overload_level(ld.capacity)]
    if over:
        w = max(over, key=lambda ld: ld.utilisation)
        return "does not fit", (
            f"combined mean {w.resource} {format_amount(w.combined_mean, w.unit)} exceeds its "
            f"capacity {format_amount(w.capacity, w.unit)} ({format_percent(w.utilisation)}), so the jobs slow down whatever "
            "their phases"
        ), w.resource
    w = max(checked, key=lambda ld: (ld.overload_probability, ld.utilisation))
    u = max(checked, key=lambda ld: ld.utilisation)
    mean_txt = f"mean load at most {format_percent(u.utilisation)} of capacity ({u.resource})"
    if w.overload_probability > max_overload:
        return "contends", (
            f"{w.resource} demand exceeds {format_amount(w.capacity, w.unit)} {format_percent(w.overload_probability)} "
            f"of the time (bursts collide {format_percent(w.collision_probability)}); {mean_txt}"
        ), w.resource
    if w.overload_probability > 0:
        tail = f"worst {w.resource} overloaded {format_percent(w.overload_probability)} of the time"
    else:
        c = max(checked, key=lambda ld: ld.collision_probability)
        tail = f"no resource is ever overloaded (bursts collide at most {format_percent(c.collision_probability)}, {c.resource})"
    return "packs well", f"{tail}; {mean_txt}", w.resource


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
