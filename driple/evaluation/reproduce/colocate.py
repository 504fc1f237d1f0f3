"""The ``colocate`` section: co-location predicted against real co-runs; its report.
"""
from __future__ import annotations

import os

import numpy as np

from driple.evaluation.reproduce.context import Context, run_stamp, say, shown_path


def section_colocate(ctx: Context) -> None:
    """Co-location predicted against real co-runs, per ``corun-<setting>`` dataset."""
    from driple.evaluation.colocate import evaluate_coruns, format_result

    from driple.predict.registry import resolve

    shipped = set(ctx.settings())
    out = {k: v for k, v in ctx.kept("colocate", "coruns").items()  # --settings: the others stay
           if k.removeprefix("corun-") not in ctx.args.settings}
    for setting in ctx.index.settings():
        coruns, name = ctx.index.corun_dir(setting), f"corun-{setting}"
        if setting not in shipped or not os.path.exists(os.path.join(coruns, "coruns.csv")):
            continue
        path, _ = resolve(setting, root=ctx.models_root())
        result = evaluate_coruns(coruns, setting=setting, solo=ctx.dataset_dir(setting),
                                 inspector=str(path))
        say(format_result(result) + "\n")
        out[name] = {**result, **run_stamp(), "command_of_a_row": f"python scripts/eval_colocate.py --coruns "
                                                                  f"{shown_path(coruns)} --setting <models>/{setting}"}
    if not out:
        say("colocate: no corun-<setting> dataset with an inspector; skipped")
        return
    ctx.save("colocate", {"coruns": out})


def report_colocate(co) -> list[str]:
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = ["## Co-location against real co-runs", "",
             "Combined mean load per worker slot (demand throttled to capacity) predicted from the "
             "inspector and, as an oracle, from the jobs' solo measurements, against the measured "
             "one; share of time two jobs burst at once. A pair fits when no job of it slowed down "
             "by more than the threshold against its solo run; predicted fit = 'packs well'.", ""]
    for name, r in co["coruns"].items():
        slow = r["slowdown"]
        lines += [f"### {name} ({len(r['coruns'])} co-runs; slow-down "
                  + (f"median {np.median(slow):.2f}x, {min(slow):.2f}-{max(slow):.2f}x" if slow else "unknown")
                  + ")", "",
                  "| resource | measured mean | inspector (error) | solo profiles (error) | measured collide "
                  "| inspector collide | solo collide |", "|---|---|---|---|---|---|---|"]
        for res, sm in r["summary"].items():
            cells = [num(sm["measured_mean"], ".1f")]
            for est in ("inspector", "solo"):
                cells.append(f"{num(sm[f'{est}_served_mean'], '.1f')} ({num(sm[f'{est}_served_rel_err'], '.0%')})")
            cells += [num(sm[f"{k}_collision"], ".2f") for k in ("measured", "inspector", "solo")]
            lines.append(f"| {res} | " + " | ".join(cells) + " |")
        lines += ["", f"| profiles | fit, predicted fit | fit, predicted not | slowed, predicted fit | "
                  f"slowed, predicted not |", "|---|---|---|---|---|"]
        for est, t in r["confusion"].items():
            lines.append(f"| {est} | {t['fit_predicted_fit']} | {t['fit_predicted_not']} | "
                         f"{t['not_predicted_fit']} | {t['not_predicted_not']} |")
        lines.append("")
    return lines + colocate_overall(co)


def colocate_overall(co) -> list[str]:
    """Every co-run set at once: the fit verdicts' confusion per profile source, how many pairs
    each got right, the pairs it got wrong, and the inspector's mean-load error per setting."""
    sets = co["coruns"]
    if not sets:
        return []
    keys = ("fit_predicted_fit", "fit_predicted_not", "not_predicted_fit", "not_predicted_not")
    sources = list(dict.fromkeys(est for r in sets.values() for est in r["confusion"]))
    lines = ["### All co-runs", "", "| profiles | fit, predicted fit | fit, predicted not | slowed, predicted fit | "
             "slowed, predicted not | right |", "|---|---|---|---|---|---|"]
    for est in sources:
        total = [sum(r["confusion"].get(est, {}).get(k, 0) for r in sets.values()) for k in keys]
        lines.append(f"| {est} | " + " | ".join(map(str, total))
                     + f" | {total[0] + total[3]} of {sum(total)} |")
    lines.append("")
    for name, r in sets.items():
        limit = r.get("max_slowdown")
        for c in r["coruns"]:
            slow = c.get("slowdown") or []
            fits = bool(slow) and limit is not None and max(slow) <= limit
            wrong = [est for est in sources if isinstance(c.get(est), dict) and
                     (c[est].get("verdict") == "packs well") != fits]
            if wrong and slow:
                lines.append(f"- missed ({', '.join(wrong)}): {name}: {' + '.join(c['models'])} — "
                             f"{'/'.join(f'{x:.2f}' for x in slow)}x ({'fits' if fits else 'slowed'}; "
                             f"inspector: {c.get('inspector', {}).get('verdict', '-')})")
    errors = []
    for name, r in sets.items():
        cells = [f"{res} {sm['inspector_served_rel_err']:.0%}" for res, sm in r["summary"].items()
                 if sm.get("inspector_served_rel_err") is not None]
        if cells:
            errors.append(f"- inspector's combined mean load per slot against the measured, {name}: " + ", ".join(cells))
    return lines + ([""] if lines[-1] else []) + errors + [""]
