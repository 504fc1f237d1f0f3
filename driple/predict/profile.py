"""A job's predicted resource profile, in the terms a scheduler uses: duty cycle, period, mean load.

:class:`ResourceProfile` holds the predicted targets of one worker (:func:`driple.metrics.target_names`:
burst amount, burst duration and idle duration of every resource, and any job-level target),
with optional prediction intervals, and derives per resource:

- **period** (s) = burst duration + idle duration: one burst/idle cycle;
- **duty cycle** = burst duration / period: the share of time the resource is in burst;
- **mean load** = idle level + (burst amount - idle level) x duty cycle (units of the burst
  amount: % of a core or % GPU, % of host memory, MB/s).

Assumptions (they change the numbers; each is a reading of the 12 burst/idle metrics, which hold no idle
*level*, only the burst level and the lengths of burst and idle runs):

1. **The series is a periodic square wave**: the burst level for ``burst_duration``, then the
   idle level for ``idle_duration``, repeated. Real runs vary in length; the metrics are means.
2. **Idle level 0 for compute, TX and RX** (and for memory on GPU hosts, where it is the memory
   controller's busy %). Then mean load = burst amount x duty cycle, a *lower* bound: on this
   project's CPU loopback jobs the k-means idle centre of compute lies anywhere between 3% and
   70% of a core (the two workers fill both cores), TX/RX idle centres at 1-25 MB/s.
3. **Memory on CPU hosts is a level, not an on/off demand.** RSS never drops to 0 between
   bursts: it swings every iteration around a level of hundreds of MB, and on 10 of this
   project's CPU loopback jobs the k-means idle centre is 50-90% of the burst amount. A memory
   footprint must also fit at its peak, or the host swaps. So the idle level of memory defaults
   to the burst amount: the mean load is the burst amount (an upper bound, too high by
   (1 - idle centre / burst amount) x idle share, 2-12% on those jobs) and the expected series
   is flat.
4. Negative predicted values (a regression head can return them) count as 0; a profile whose
   burst and idle durations are both 0 carries no timing and counts as always in burst (duty
   cycle 1, the safe reading for packing).

Pass ``idle_levels={"compute": 40.0}`` (units of the burst amount) when the idle level is known,
e.g. from a measured run; it replaces the default of that resource.

**Step time and throughput.** When the declaration has the job-level target ``step_time``
(labels v2, :mod:`driple.metrics`), a profile with the job's per-worker ``batch_size`` also
gives the **throughput** = workers x batch size / step time (samples/s, all workers; the
setting's workers), with an interval from the step time's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from driple.errors import DripleError
from driple.metrics import STEP_TIME
from driple.metrics import resource as declared_resource
from driple.metrics import resource_names, resources, target_names, targets, unit
from driple.predict.formatting import format_amount, format_duration, format_number, format_percent

#: 2: ``batch_size``, ``workers`` and ``throughput`` added (1: the 12 metrics only).
PROFILE_SCHEMA = "driple-profile/2"
READ_SCHEMAS = ("driple-profile/1", PROFILE_SCHEMA)


def device_of(setting: str) -> str:
    """``"gpu"`` or ``"cpu"``: the device kind of a setting id (``cpu`` when it cannot be read)."""
    from driple.settings import parse_setting

    try:
        return parse_setting(setting).device
    except DripleError:
        return "gpu" if str(setting).strip().lower().startswith("gpu") else "cpu"


@dataclass(frozen=True)
class ResourceShape:
    """One resource of a profile as a two-level square wave.

    ``burst_amount`` and ``idle_level`` in the resource's unit (%, MB/s); durations in s, all
    already clipped at 0 (module docstring, assumption 4).
    """

    burst_amount: float
    burst_duration_s: float
    idle_duration_s: float
    idle_level: float = 0.0

    @property
    def period_s(self) -> float:
        """Burst + idle duration (s)."""
        return self.burst_duration_s + self.idle_duration_s

    @property
    def duty_cycle(self) -> float:
        """Share of time in burst, in [0, 1]; 1 when both durations are 0 (no timing known)."""
        p = self.period_s
        return self.burst_duration_s / p if p > 0 else 1.0

    @property
    def mean_load(self) -> float:
        """Time-average level: idle level + (burst amount - idle level) x duty cycle."""
        return self.idle_level + (self.burst_amount - self.idle_level) * self.duty_cycle

    def level(self, t: np.ndarray, phase: float = 0.0) -> np.ndarray:
        """The square wave at times ``t`` (s): burst level on ``[phase, phase + burst)`` mod period."""
        t = np.asarray(t, dtype=np.float64)
        d = self.duty_cycle
        if self.period_s <= 0 or d >= 1.0:
            return np.full(t.shape, self.burst_amount)
        if d <= 0.0:
            return np.full(t.shape, self.idle_level)
        # a nudge of 1e-9 period keeps samples that fall on a period boundary (t = k x period,
        # which np.mod may put at period - 1 ulp) at the start of the cycle
        pos = np.mod(t - phase + 1e-9 * self.period_s, self.period_s)
        return np.where(pos < self.burst_duration_s, self.burst_amount, self.idle_level)


@dataclass
class ResourceProfile:
    """The predicted burst/idle profile of one worker of a job.

    Args:
        setting: Setting id the prediction is for, e.g. ``cpu-ddp-w2-lo`` (its device kind sets
            the unit of compute and the default idle level of memory).
        model: Plain description of the job, e.g. ``resnet32 bs64 sgd``.
        metrics: The targets, ``{name: value}`` with every name of
            :func:`driple.metrics.target_names`; stored in that order, as floats.
        intervals: Optional ``{metric: (low, high)}`` prediction intervals, same units.
        nominal_coverage: Coverage the intervals aim at, e.g. 0.9; None without intervals.
        idle_levels: Optional ``{resource: level}`` overriding the assumed idle levels.
        notes: Plain-text caveats from the predictor: values clipped to a physical bound,
            values outside the range of the inspector's training jobs (extrapolations).
        batch_size: The per-worker batch size of the job (for the throughput), or None.
        resident: Optional ``{resource: amount}`` a worker holds beside the predicted demand at
            all times, e.g. ``{"memory": 250.0}``: the runtime's part of the resident set, which
            the memory label (peak allocated bytes) leaves out (:mod:`driple.collect.resident`).
            Not part of the metrics or shapes; :func:`driple.predict.colocate.colocate` adds it.
        calibration: ``"seen family"`` when the job's model family was among the inspector's
            training families, ``"unseen family"`` when it was not (a user's model): then the
            prediction and its intervals use the calibration measured on held-out families
            (:mod:`driple.predict.unseen`). None when the inspector has no such calibration.
        memory: The simulated memory of the step (:mod:`driple.graph.memory`), when the
            memory amount comes from the simulator: ``peak_mb`` (all of a step's peak, transients
            included), ``breakdown_mb``, ``slot_mb`` (a worker's share of the machine's memory),
            ``fits`` and ``exceeds_by_mb``; or None.
        flags: ``{target: [flag, ...]}`` for each number that is not the model's own output:
            ``extrapolated`` (outside the training jobs' range), ``clipped`` (to a physical
            bound), ``raised to the training minimum``, ``scaled to the step time`` (a cycle
            longer than a step); None when there is none (:mod:`driple.predict.bounds`).
        hardware: The machine the profile describes: ``{"described": "trained" | "this host" |
            a spec file, "spec": HardwareSpec dict}`` (:mod:`driple.hardware`), or None.
    """

    setting: str
    model: str
    metrics: dict
    intervals: dict | None = None
    nominal_coverage: float | None = None
    idle_levels: dict | None = None
    notes: list = field(default_factory=list)
    batch_size: int | None = None
    resident: dict | None = None
    calibration: str | None = None
    hardware: dict | None = None
    memory: dict | None = None
    flags: dict | None = None

    def __post_init__(self) -> None:
        names = target_names()
        if not isinstance(self.metrics, Mapping):
            raise DripleError(f"metrics must be a {{target: value}} dict with the {len(names)} driple targets")
        missing = [m for m in names if m not in self.metrics]
        extra = [m for m in self.metrics if m not in names]
        if missing or extra:
            raise DripleError(
                f"a profile needs exactly the {len(names)} targets of driple.metrics.target_names(); "
                f"missing {missing}, unknown {extra}"
            )
        self.metrics = {m: _finite(self.metrics[m], m) for m in names}
        if self.intervals is not None:
            bad = [m for m in self.intervals if m not in names]
            if bad:
                raise DripleError(f"intervals for unknown metric(s) {bad}; use names of driple.metrics.target_names()")
            iv = {}
            for m in names:
                if m in self.intervals:
                    lo, hi = (_finite(v, m) for v in self.intervals[m])
                    if lo > hi:
                        raise DripleError(f"interval of {m} has low {lo} > high {hi}")
                    iv[m] = (lo, hi)
            self.intervals = iv
        if self.calibration is not None:
            from driple.predict.unseen import SEEN, UNSEEN

            if self.calibration not in (SEEN, UNSEEN):
                raise DripleError(f"calibration must be {SEEN!r}, {UNSEEN!r} or None, not {self.calibration!r}")
        if self.nominal_coverage is not None:
            c = _finite(self.nominal_coverage, "nominal_coverage")
            if not 0.0 < c < 1.0:
                raise DripleError(f"nominal_coverage must lie strictly between 0 and 1, got {c}")
            self.nominal_coverage = c
        if self.idle_levels is not None:
            known = resource_names()
            bad = [r for r in self.idle_levels if r not in known]
            if bad:
                raise DripleError(f"idle_levels for unknown resource(s) {bad}; use {list(known)}")
            self.idle_levels = {r: _finite(self.idle_levels[r], r) for r in known if r in self.idle_levels}
        if self.resident is not None:
            known = resource_names()
            bad = [r for r in self.resident if r not in known]
            if bad:
                raise DripleError(f"resident amounts for unknown resource(s) {bad}; use {list(known)}")
            self.resident = {r: max(_finite(self.resident[r], r), 0.0) for r in known if r in self.resident}
        self.setting = str(self.setting)
        self.model = str(self.model)
        self.notes = [str(n) for n in (self.notes or [])]
        if self.batch_size is not None:
            b = _finite(self.batch_size, "batch_size")
            if b < 1 or b != int(b):
                raise DripleError(f"batch_size must be a whole number >= 1, got {self.batch_size!r}")
            self.batch_size = int(b)

    @classmethod
    def from_array(cls, setting: str, model: str, values, **kwargs) -> "ResourceProfile":
        """Build from one value per target in declared order (one row of a predictor's output)."""
        names = target_names()
        v = np.asarray(values, dtype=np.float64).ravel()
        if v.size != len(names):
            raise DripleError(f"expected {len(names)} values in driple.metrics.target_names() order, got {v.size}")
        return cls(setting, model, dict(zip(names, v.tolist())), **kwargs)

    # ----- derived quantities -----

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"gpu"``, from the setting id."""
        return device_of(self.setting)

    def idle_level(self, resource: str) -> float:
        """Level between bursts (unit of the burst amount); see the module's assumptions 2-3."""
        decl = declared_resource(resource)
        if self.idle_levels and resource in self.idle_levels:
            return self.idle_levels[resource]
        if self.device in decl.level_on:
            return max(self.metrics[f"{resource}_burst_amount"], 0.0)
        return 0.0

    def shape(self, resource: str) -> ResourceShape:
        """The resource as a two-level square wave (negative metrics read as 0)."""
        declared_resource(resource)
        m = self.metrics
        return ResourceShape(
            burst_amount=max(m[f"{resource}_burst_amount"], 0.0),
            burst_duration_s=max(m[f"{resource}_burst_duration"], 0.0),
            idle_duration_s=max(m[f"{resource}_idle_duration"], 0.0),
            idle_level=self.idle_level(resource),
        )

    def duty_cycle(self, resource: str) -> float:
        """burst duration / (burst + idle duration), in [0, 1]."""
        return self.shape(resource).duty_cycle

    def period_s(self, resource: str) -> float:
        """burst + idle duration (s)."""
        return self.shape(resource).period_s

    def mean_load(self, resource: str) -> float:
        """Expected time-average of the resource, in its unit (see assumptions)."""
        return self.shape(resource).mean_load

    @property
    def workers(self) -> int | None:
        """Workers of the setting (None when the setting id cannot be read)."""
        from driple.settings import parse_setting

        try:
            return parse_setting(self.setting).workers
        except DripleError:
            return None

    @property
    def step_time_s(self) -> float | None:
        """Predicted step time (s), when the declaration has ``step_time``."""
        return self.metrics.get(STEP_TIME.name)

    def _samples(self) -> float | None:
        if self.batch_size is None or self.workers is None:
            return None
        return float(self.workers * self.batch_size)

    @property
    def throughput(self) -> float | None:
        """Samples per second of the whole job: workers x batch size / step time (None without a
        step time, a batch size or a readable setting)."""
        step, samples = self.step_time_s, self._samples()
        if step is None or samples is None or step <= 0:
            return None
        return samples / step

    @property
    def throughput_interval(self) -> tuple | None:
        """``(low, high)`` samples/s from the step time's interval (a shorter step is faster;
        an interval reaching 0 s has no upper bound: ``inf``)."""
        iv = (self.intervals or {}).get(STEP_TIME.name)
        samples = self._samples()
        if iv is None or samples is None or self.throughput is None:
            return None
        lo, hi = iv
        return (samples / hi if hi > 0 else math.inf, samples / lo if lo > 0 else math.inf)

    def units(self) -> dict:
        """``{target: unit}``; compute's % is of one core on CPU hosts, GPU utilisation on GPU hosts."""
        return {m: unit(m) for m in target_names()}

    # ----- plain data -----

    def to_dict(self) -> dict:
        """Plain JSON-able dict (schema ``driple-profile/2``); derived values included for readers.

        Keys: ``schema, setting, model, metrics, units, intervals (dict of [low, high] or null),
        nominal_coverage, calibration ("seen family", "unseen family" or null), idle_levels
        (overrides or null), resident (or null), notes (list of str), resources,
        batch_size (or null), workers (or null), throughput, hardware`` (the machine the profile
        describes, or null), ``memory`` (the simulated peak, breakdown and fit, or null), ``flags``
        (per target, why a number is not the model's own: or null) where ``resources[res]`` holds
        ``duty_cycle, period_s, mean_load, burst_amount, burst_duration_s, idle_duration_s,
        idle_level`` and ``throughput`` is ``{"samples_per_s", "interval" ([low, high] or null)}``
        or null (no step time or batch size). :meth:`from_dict` reads it back (derived keys
        ignored), and reads ``driple-profile/1`` documents too.
        """
        resources = {}
        for r in resource_names():
            s = self.shape(r)
            resources[r] = {
                "duty_cycle": s.duty_cycle,
                "period_s": s.period_s,
                "mean_load": s.mean_load,
                "burst_amount": s.burst_amount,
                "burst_duration_s": s.burst_duration_s,
                "idle_duration_s": s.idle_duration_s,
                "idle_level": s.idle_level,
            }
        return {
            "schema": PROFILE_SCHEMA,
            "setting": self.setting,
            "model": self.model,
            "metrics": dict(self.metrics),
            "units": self.units(),
            "intervals": None if self.intervals is None else {m: [lo, hi] for m, (lo, hi) in self.intervals.items()},
            "nominal_coverage": self.nominal_coverage,
            "calibration": self.calibration,
            "idle_levels": None if self.idle_levels is None else dict(self.idle_levels),
            "resident": None if self.resident is None else dict(self.resident),
            "notes": list(self.notes),
            "resources": resources,
            "batch_size": self.batch_size,
            "workers": self.workers,
            "hardware": self.hardware,
            "memory": self.memory,
            "flags": self.flags,
            "throughput": None if self.throughput is None else {
                "samples_per_s": self.throughput,
                "interval": None if self.throughput_interval is None else list(self.throughput_interval)},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "ResourceProfile":
        """Inverse of :meth:`to_dict` (``units`` and ``resources`` are recomputed, not read)."""
        schema = d.get("schema", PROFILE_SCHEMA)
        if schema not in READ_SCHEMAS:
            raise DripleError(f"unknown profile schema {schema!r}; this driple reads "
                              f"{' and '.join(repr(s) for s in READ_SCHEMAS)}")
        for k in ("setting", "model", "metrics"):
            if k not in d:
                raise DripleError(f"profile dict lacks {k!r}; it needs setting, model and metrics")
        iv = d.get("intervals")
        return cls(
            setting=d["setting"],
            model=d["model"],
            metrics=dict(d["metrics"]),
            intervals=None if iv is None else {m: tuple(v) for m, v in iv.items()},
            nominal_coverage=d.get("nominal_coverage"),
            calibration=d.get("calibration"),
            idle_levels=d.get("idle_levels"),
            resident=d.get("resident"),
            notes=list(d.get("notes") or []),
            batch_size=d.get("batch_size"),
            hardware=d.get("hardware"),
            memory=d.get("memory"),
            flags=d.get("flags"),
        )

    # ----- expected series -----

    def timeseries(self, seconds: float, hz: float = 100.0, phase=None) -> tuple[np.ndarray, dict]:
        """The expected square waves: ``(t, {resource: values})``, ``t = 0, 1/hz, ...`` below ``seconds``.

        Each wave is in burst on ``[phase, phase + burst_duration)`` modulo the period, at its
        idle level otherwise (assumptions in the module docstring). ``phase`` (s) is one offset
        for all resources or ``{resource: offset}``; default 0 (a burst starts at t = 0).
        Point samples: a burst shorter than ``1/hz`` may fall between samples.
        """
        if not (seconds > 0 and hz > 0):
            raise DripleError(f"timeseries needs seconds > 0 and hz > 0, got {seconds}, {hz}")
        n = int(math.floor(seconds * hz + 1e-9))
        t = np.arange(max(n, 1)) / float(hz)
        names = resource_names()
        if phase is None:
            phases = {r: 0.0 for r in names}
        elif isinstance(phase, Mapping):
            bad = [r for r in phase if r not in names]
            if bad:
                raise DripleError(f"phase for unknown resource(s) {bad}; use {list(names)}")
            phases = {r: float(phase.get(r, 0.0)) for r in names}
        else:
            phases = {r: float(phase) for r in names}
        return t, {r: self.shape(r).level(t, phases[r]) for r in names}

    # ----- words -----

    def _amount_words(self, resource: str, value: float) -> str:
        return declared_resource(resource).words(format_number(value), self.device)

    def describe_resource(self, resource: str) -> str:
        """One plain sentence about one resource (numbers rounded to 3 significant digits)."""
        decl = declared_resource(resource)
        s = self.shape(resource)
        amount = self._amount_words(resource, s.burst_amount)
        mean = self._amount_words(resource, s.mean_load)
        level = decl.level_on.get(self.device)
        if level and s.idle_level == s.burst_amount:
            return (
                f"{decl.title} holds up to {amount} ({level}; peak level {format_percent(s.duty_cycle)} of the "
                f"time, cycle {format_duration(s.period_s)})"
            )
        if s.duty_cycle <= 0.0:
            return f"{decl.title} idle (at {self._amount_words(resource, s.idle_level)})"
        if s.duty_cycle >= 1.0:
            return f"{decl.title} busy all the time at {amount}"
        idle = "" if s.idle_level == 0 else f" (idle level {self._amount_words(resource, s.idle_level)})"
        return (
            f"{decl.title} busy {format_percent(s.duty_cycle)} of the time in {format_duration(s.burst_duration_s)} bursts at "
            f"{amount}, idle {format_duration(s.idle_duration_s)} between{idle}; mean {mean}"
        )

    def describe(self) -> str:
        """One line per resource in plain words, e.g. ``network TX busy 35% of the time in 120 ms
        bursts at 410 MB/s, idle 223 ms between; mean 144 MB/s``, then one per job-level target
        (``step time 0.25 s``)."""
        lines = [self.describe_resource(r) for r in resource_names()]
        lines += [f"{t.label} {format_number(self.metrics[t.name])} {t.unit}" for t in targets() if t.resource is None]
        if self.throughput is not None:
            lines.append(f"throughput {format_number(self.throughput)} samples/s ({self.workers} workers x "
                         f"batch {self.batch_size} / step time)")
        return "\n".join(lines)

    def _resident_words(self, resource: str) -> str:
        held = (self.resident or {}).get(resource)
        return f" (+{self._amount_words(resource, held)} held by the runtime)" if held else ""

    def summary(self) -> str:
        """The one sentence a scheduler wants: the mean load of every resource, and the network
        burst pattern (what collides when jobs share a link)."""
        loads = [(r, self.shape(r.name)) for r in resources()]
        means = [f"{r.short} {self._amount_words(r.name, s.mean_load)}" if r.network
                 else self._amount_words(r.name, s.mean_load) + self._resident_words(r.name) for r, s in loads]
        words = (f"{self.model} on {self.setting} uses per worker on average "
                 + (" and ".join([", ".join(means[:-1]), means[-1]]) if len(means) > 1 else "".join(means)))
        network = [(r, s) for r, s in loads if r.network]
        if network:
            r, net = max(network, key=lambda rs: rs[1].burst_amount * rs[1].duty_cycle)
            if 0.0 < net.duty_cycle < 1.0:
                words += (
                    f"; its network ({r.short}) bursts at {self._amount_words(r.name, net.burst_amount)} for "
                    f"{format_duration(net.burst_duration_s)} every {format_duration(net.period_s)}"
                )
        if self.step_time_s is not None:
            words += f"; a step takes {format_duration(max(self.step_time_s, 0.0))}"
            if self.throughput is not None:
                words += f" ({format_number(self.throughput)} samples/s)"
        return words + "."

    def __str__(self) -> str:
        return self.summary()


def plot_profile(profile: ResourceProfile, path, seconds: float = 2.0, hz: float = 1000.0, phase=None) -> Path:
    """Draw the expected series of every resource stacked (PNG/PDF/SVG by suffix); returns the path written.

    Each panel: the square wave, its mean load (dashed) and, when the profile has an interval for
    the burst amount, that interval as a band.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t, series = profile.timeseries(seconds, hz=hz, phase=phase)
    declared = resources()
    fig, axes = plt.subplots(len(declared), 1, figsize=(8, 1.75 * len(declared)), sharex=True, squeeze=False)
    for ax, decl in zip(axes[:, 0], declared):
        r = decl.name
        s = profile.shape(r)
        ax.plot(t, series[r], drawstyle="steps-post", color="C0", lw=1.2)
        amount = decl.amount  # the burst amount's unit (memory: MB in labels v2, not % of host)
        ax.axhline(s.mean_load, color="C1", ls="--", lw=1, label=f"mean {format_amount(s.mean_load, amount)}")
        iv = (profile.intervals or {}).get(f"{r}_burst_amount")
        if iv is not None:
            cov = f"{format_percent(profile.nominal_coverage)} " if profile.nominal_coverage else ""
            ax.axhspan(iv[0], iv[1], color="C0", alpha=0.12, lw=0, label=f"burst amount {cov}interval")
        ax.set_ylabel(decl.axis_label.get(profile.device, f"{decl.short} ({decl.unit})") if amount == decl.unit
                      else f"{decl.short} ({amount})")
        top = max(s.burst_amount, iv[1] if iv is not None else 0.0)
        ax.set_ylim(bottom=min(0.0, float(np.min(series[r]))), top=top * 1.4 if top > 0 else 1.0)
        ax.legend(loc="upper right", fontsize=8, ncol=2, framealpha=0.9)
    axes = axes[:, 0]
    axes[-1].set_xlabel("time (s)")
    axes[0].set_title(f"{profile.model} on {profile.setting}: expected per-worker pattern", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _finite(v, what: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise DripleError(f"{what} must be a number, got {v!r}") from None
    if not math.isfinite(x):
        raise DripleError(f"{what} must be finite, got {x}")
    return x
