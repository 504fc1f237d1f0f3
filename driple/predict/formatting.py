"""Predictions in words and tables: the one number formatter, and the text of profiles and
co-location reports that ``driple predict`` and ``driple colocate`` print.

Every number a prediction shows goes through :func:`format_number` (3 significant digits,
integers from 1000 up, no exponent for everyday magnitudes), so the table, the sentences and
the caveats write the same value the same way (``1314 MB/s``, never ``1.31e+03``).
"""
from __future__ import annotations

from typing import Mapping, Optional

from driple.metrics import KINDS, resources, targets, unit
from driple.predict.unseen import UNSEEN, joined_modes


def format_number(x: float) -> str:
    """3 significant digits, no exponent for everyday magnitudes: 1314, 410, 97.5, 2.48, 0.0123."""
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.3g}"


def format_amount(x: float, unit: str) -> str:
    """A number with its unit: ``116%``, ``1314 MB/s``."""
    return f"{format_number(x)}%" if unit == "%" else f"{format_number(x)} {unit}"


def format_percent(fraction: float) -> str:
    """A share as a percentage, whole numbers except below 1%: 35%, 0.4%."""
    p = 100 * fraction
    return f"{p:.1f}%" if 0 < p < 1 else f"{p:.0f}%"


def format_duration(seconds: float) -> str:
    """Milliseconds below 1 s (120 ms, 9.5 ms), else seconds (1.53 s)."""
    return f"{format_number(seconds * 1000)} ms" if seconds < 1 else f"{seconds:.2f} s"


def format_profile(profile, about: Optional[Mapping] = None) -> str:
    """The text ``driple predict`` prints: a table of every target with its interval (a row per
    resource, then one per job-level target such as the step time, and the throughput derived
    from it), the coverage of the intervals, the profile in words and its caveats. ``about``: the inspector's description
    (:meth:`~driple.predict.predictor.Predictor.describe`)."""
    about = about or {}
    hardware = about.get("hardware")  # the jobs the inspector learned from ran there
    lines = [f"{profile.model} -- setting {profile.setting}" + (f" (measured on {hardware})" if hardware else "")]
    if about.get("trained"):
        lines.append(f"inspector: {about['trained']}")
    described = (profile.hardware or {}).get("described")
    if described and described != "trained":
        from driple.hardware.spec import HardwareSpec

        spec = HardwareSpec.from_dict(profile.hardware["spec"])
        lines.append(f"hardware: {described}, {spec.summary()}; durations and step time carried "
                     "from the measured machine by the roofline's op-class terms")
        lines += carried_error_lines(profile.hardware.get("measured_error"))
    head = f"{'resource':<9}" + "".join(f"{k.replace('_', ' '):>28}" for k in KINDS)
    lines += ["", head]
    for r in resources():
        # a space before every cell even when it is wider than its column (long intervals)
        lines.append(f"{r.name:<9}" + "".join(f" {_cell(profile, f'{r.name}_{k}'):>27}" for k in KINDS))
    for t in targets():
        if t.resource is None:
            lines.append(f"{t.label:<9}" + f" {_cell(profile, t.name):>27}")
    if profile.throughput is not None:  # derived from the step time: workers x batch / step
        cell = f"{format_number(profile.throughput)} samples/s"
        if profile.throughput_interval is not None:
            lo, hi = profile.throughput_interval
            cell += f" [{format_number(lo)}, {format_number(hi) if hi != float('inf') else 'inf'}]"
        lines.append("throughput" + f"{' ' + cell:>27}")  # a space even when the cell is wide
    unseen = profile.calibration == UNSEEN
    if profile.intervals and profile.nominal_coverage:
        if unseen:  # calibrated on, and measured on, families the models had not seen
            cov = ((about.get("unseen_family") or {}).get("source") or {}).get("coverage")
            where = "held-out model families"
        else:
            cov, where = (about.get("scores") or {}).get("interval_coverage"), "held-out jobs"
        note = f"; measured coverage {cov:.0%} on {where}" if isinstance(cov, (int, float)) else ""
        lines.append(f"[low, high]: {profile.nominal_coverage:.0%} prediction interval "
                     f"(split conformal{note})")
    if unseen:
        joined = bool(joined_modes((about.get("unseen_family") or {}).get("modes")))
        lines.append("a model family the inspector did not train on: "
                     + ("durations and intervals" if joined else "intervals") + " as calibrated on held-out families")
    if profile.memory:
        lines.append(memory_line(profile.memory))
    lines += ["", profile.describe()]
    if profile.notes:
        lines += ["", "caveats:"] + [f"  - {n}" for n in profile.notes]
    return "\n".join(lines)


def _cell(profile, name: str) -> str:
    """``value unit [low, high]`` of one target of a profile."""
    cell = f"{format_number(profile.metrics[name])} {unit(name)}"
    if profile.intervals and name in profile.intervals:
        lo, hi = profile.intervals[name]
        cell += f" [{format_number(lo)}, {format_number(hi)}]"
    return cell


def format_colocation(setting: str, profiles: Mapping, capacity: Mapping, report, pairs) -> str:
    """The text ``driple colocate`` prints: the slot's capacity, each job in one sentence, the
    combined load per resource, the verdict and the pairs, best first."""
    names = [r.name for r in resources()]
    cap = ", ".join(f"{r} {'unlimited' if capacity.get(r) is None else format_number(capacity[r])}"
                    for r in names)
    lines = [f"setting {setting}; capacity of one worker slot: {cap}"]
    for name, p in profiles.items():
        lines.append(f"  job {name}: {p.summary()}")
    lines += ["", f"{'resource':<9}{'combined mean':>15}{'of capacity':>13}{'collide':>10}{'overloaded':>12}"]
    for res in names:
        r = report.resources[res]
        util = "-" if r.utilisation is None else f"{r.utilisation:.0%}"
        over = "-" if r.overload_probability is None else f"{r.overload_probability:.0%}"
        lines.append(f"{res:<9}{format_number(r.combined_mean) + ' ' + r.unit:>15}{util:>13}"
                     f"{r.collision_probability:>10.0%}{over:>12}")
    lines += ["", f"verdict: {report.verdict} -- {report.reason}",
              "(collide: share of time two or more jobs burst at once, independent random phases; "
              "overloaded: share of time demand exceeds capacity)"]
    if pairs:
        lines += ["", "pairs, best first:"]
        lines += [f"  {' + '.join(p.jobs)}: {p.verdict} -- {p.reason}" for p in pairs]
    return "\n".join(lines)


def memory_line(memory: Mapping) -> str:
    """One line: the simulated peak and whether it fits in a worker's slot of the machine."""
    peak = f"memory (simulated): peak {format_number(memory['peak_mb'])} MB"
    slot = memory.get("slot_mb")
    if memory.get("fits") is None or not slot:
        return peak
    if memory["fits"]:
        return f"{peak}, fits in the {format_number(slot)} MB of a worker's slot"
    return (f"{peak}: DOES NOT FIT: {format_number(memory['exceeds_by_mb'])} MB more than the "
            f"{format_number(slot)} MB of a worker's slot; the job cannot run there")


def memory_breakdown(memory: Mapping) -> str:
    """The simulated peak's parts (MB), largest first, and when the peak falls."""
    parts = sorted((memory.get("breakdown_mb") or {}).items(), key=lambda kv: -kv[1])
    lines = [memory_line(memory), f"  at the peak ({memory.get('phase') or '?'}):"]
    lines += [f"    {k.replace('_', ' '):<16} {format_number(v):>10} MB" for k, v in parts if v > 0]
    found = memory.get("largest_batch")
    if found:
        lines.append(largest_batch_line(found))
    return "\n".join(lines)


def largest_batch_line(found: Mapping) -> str:
    """``memory.largest_batch`` of a profile in words."""
    slot = format_number(found["slot_mb"])
    if found.get("unbounded"):
        return f"  largest batch that fits: memory does not limit it (batch {found['batch']:,} still fits {slot} MB)"
    if not found["batch"]:
        return (f"  largest batch that fits: none; batch 1 needs {format_number(found['next_peak_mb'])} MB "
                f"of the {slot} MB slot")
    return (f"  largest batch that fits: {found['batch']:,} per worker (simulated peak "
            f"{format_number(found['peak_mb'])} MB of the {slot} MB slot; {found['batch'] + 1:,} needs "
            f"{format_number(found['next_peak_mb'])} MB)")


def carried_error_lines(measured: Optional[list]) -> list[str]:
    """How far the inspector's carried predictions were measured off (docs/hardware.md)."""
    if measured is None:
        return []
    if not measured:
        return ["measured error when carried: not measured for this inspector (docs/hardware.md)"]
    return [f"measured error when carried to {m['machine']} ({m['jobs']} jobs): step time "
            f"{m['step_time_mape']:.1f} % MAPE, durations {m['durations_median_mape']:.0f} % "
            "(median over the duration targets)" for m in measured]
