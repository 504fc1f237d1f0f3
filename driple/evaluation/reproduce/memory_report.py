"""The memory section of the report: what ``scripts/fit_memory.py --write`` measured of the
memory simulator (``memory.json``): the amount on held-out families and out-of-zoo sets, and the
burst and idle durations of the simulated cycle beside the inspector's own.
"""
from __future__ import annotations

from driple.evaluation.memory import cycle_wins


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1f} %"


def report_memory(memory: dict) -> list[str]:
    settings = memory.get("settings") or {}
    if not settings:
        return []
    lines = ["## Memory: the simulator", "",
             f"`{memory.get('command', 'python scripts/fit_memory.py --write')}` ({memory.get('date', '?')}). "
             "Each family predicted with the fit made on the other families (docs/memory.md).", "",
             "| setting | amount: held-out families (median) | out of zoo | burst / idle: the cycle x measured step "
             "| x held-out step (its MAPE) | the inspector's own | x the unseen-family rule's step (its MAPE) "
             "| the rule's own | profiles take |",
             "|---|---|---|---|---|---|---|---|---|"]
    for setting, r in settings.items():
        ooz = "; ".join(f"{v['mape']:.1f} %" for v in (r.get("out_of_zoo") or {}).values()) or "-"
        cycle, measured, held, network, used = r.get("cycle") or {}, "-", "-", "-", "-"
        rule = rule_own = "-"
        if cycle:
            m = cycle["with_measured_step"]
            measured = f"{m['burst_mape']:.1f} / {m['idle_mape']:.1f} %"
            h = cycle.get("with_held_out_step")
            held = f"{h['burst_mape']:.1f} / {h['idle_mape']:.1f} % ({h['step_mape']:.1f} %)" if h else "-"
            n = cycle.get("network_held_out")
            network = f"{n['burst_mape']:.1f} / {n['idle_mape']:.1f} %" if n else "-"
            u, o = cycle.get("with_unseen_rule_step"), cycle.get("unseen_rule_held_out")
            rule = f"{u['burst_mape']:.1f} / {u['idle_mape']:.1f} % ({u['step_mape']:.1f} %)" if u else "-"
            rule_own = f"{o['burst_mape']:.1f} / {o['idle_mape']:.1f} %" if o else "-"
            used = "the cycle" if cycle_wins(cycle) else "the inspector"
        lines.append(f"| {setting} | {_pct(r.get('lofo_mape'))} ({_pct(r.get('lofo_median'))}) | {ooz} | {measured} "
                     f"| {held} | {network} | {rule} | {rule_own} | {used} |")
    others = [(s, path, o) for s, r in settings.items() for path, o in (r.get("other_machines") or {}).items()]
    if others:
        lines += ["", "The same settings' rows on another machine, fitted and scored on their own families:", ""]
        for setting, path, o in others:
            c = (o.get("cycle") or {}).get("with_measured_step")
            carried = o.get("carried")
            lines.append(f"- {setting}, `{path}` ({o['jobs']} jobs): amount {_pct(o.get('lofo_mape'))} "
                         f"({_pct(o.get('lofo_median'))})" + (
                             f", with the shipped machine's fit {_pct(carried['mape'])}" if carried else "") + (
                             f"; burst / idle with the measured step {c['burst_mape']:.1f} / {c['idle_mape']:.1f} %"
                             if c else "") + "".join(
                             f"; out of zoo `{p}`: {v['mape']:.1f} %" for p, v in (o.get("out_of_zoo") or {}).items()))
    return lines + [""]
