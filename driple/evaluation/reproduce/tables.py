"""Markdown tables of one evaluated split: per-target NRMSE and MAPE of every estimator beside
the noise floor, and the inspector against the table models.
"""
from __future__ import annotations

import numpy as np


def fixed(v, pct=False):
    if v is None:
        return "-"
    return f"{v:.0f}%" if pct else f"{v:.3f}"


def percent(v) -> str:
    """A percentage with one decimal, ``-`` for none."""
    return "-" if v is None else f"{v:.1f}%"


def split_tables(rep) -> list[str]:
    """Per-target NRMSE and MAPE of every estimator (with the noise floor when known), the
    interval coverage and the estimators' notes, for one evaluated split."""
    from driple.inspector.evaluate import ratio_text

    lines = []
    for key, title in (("nrmse", "NRMSE"), ("mape", "MAPE %")):
        floor = (rep.get("floor_check") or {}).get(key)
        head = "| target | " + ("floor | " if floor else "") + " | ".join(rep["estimators"]) + " | best |"
        head += " vs floor |" if floor else ""
        lines += [f"{title}:", "", head, "|---" * (head.count("|") - 1) + "|"]
        for t in rep["targets"]:
            cells = [fixed(rep["scores"][m][t][key], False) if key == "nrmse" else
                     fixed(rep["scores"][m][t][key], True) for m in rep["estimators"]]
            known = {m: rep["scores"][m][t][key] for m in rep["estimators"]
                     if rep["scores"][m][t][key] is not None}
            best = min(known, key=known.get) if known else "-"
            row = f"| {t} | "
            if floor:
                fl = floor.get(t) or {}
                row += (fixed(fl.get("floor")) if key == "nrmse" else fixed(fl.get("floor"), True)) + " | "
            row += " | ".join(cells) + f" | {best} |"
            if floor:
                fl = floor.get(t) or {}
                row += (f" {ratio_text(fl['ratio'])}{'' if fl['within'] else ' **over 2x**'} |"
                        if fl.get("ratio") is not None else " - |")
            lines.append(row)
        mean = [rep["scores"][m]["mean"][key] for m in rep["estimators"]]
        lines.append("| mean | " + ("| " if floor else "")
                     + " | ".join(fixed(v, key == "mape") for v in mean) + " | |" + (" |" if floor else ""))
        lines.append("| targets won | " + ("| " if floor else "")
                     + " | ".join(str(rep["wins"][key][m]) for m in rep["estimators"])
                     + " | |" + (" |" if floor else ""))
        lines.append("")
    cov = rep.get("coverage") or {}
    if cov:
        lines.append("Interval coverage on the test jobs (nominal "
                     f"{next((v['nominal'] for v in cov.values() if 'nominal' in v), 0.9):.0%}, "
                     "calibrated on the calibration jobs): "
                     + ", ".join(f"{m} {fixed(100 * v['mean'], True)}" if v.get("mean") is not None
                                 else f"{m} -" for m, v in cov.items()))
        lines.append("")
    for m, notes in (rep.get("notes") or {}).items():
        lines.append(f"- {m}: {'; '.join(notes)}")
    if rep.get("notes"):
        lines.append("")
    return lines


def table_models(rep) -> list[str]:
    from driple.inspector.baselines import BASELINES  # the table models a graph network must beat

    return [m for m in rep["estimators"] if m in BASELINES]


def medians(rep) -> tuple[dict, str]:
    """Median over the targets (those the inspector and every table model score) of the MAPE of
    the inspector and of each table model, and the best table model by it."""
    scores, tables = rep["scores"], table_models(rep)
    med = {m: float(np.median([scores[m][t]["mape"] for t in rep["targets"]
                               if scores[m][t]["mape"] is not None and scores["inspector"][t]["mape"] is not None]))
           for m in ["inspector", *tables]}
    return med, min(tables, key=med.get)


def against_tables(rep, margin: float = 0.25) -> list[str]:
    """Per target the inspector's MAPE beside the best table model's, and the medians over the
    targets: is the inspector ``margin`` lower (the accuracy bar)?"""
    tables = table_models(rep)
    if "inspector" not in rep["estimators"] or not tables:
        return []
    scores = rep["scores"]
    lines = ["Inspector against the table models (MAPE %; best of " + ", ".join(tables) + " per target):", "",
             "| target | inspector | best table model | its MAPE | inspector lower by |", "|---|---|---|---|---|"]
    for t in rep["targets"]:
        mine = scores["inspector"][t]["mape"]
        known = {m: scores[m][t]["mape"] for m in tables if scores[m][t]["mape"] is not None}
        if mine is None or not known:
            continue
        best = min(known, key=known.get)
        lower = 1 - mine / known[best] if known[best] else float("nan")
        lines.append(f"| {t} | {fixed(mine, True)} | {best} | {fixed(known[best], True)} | "
                     f"{lower:.0%}{' ✓' if lower >= margin else ''} |")
    med, best = medians(rep)
    lower = 1 - med["inspector"] / med[best] if med[best] else float("nan")
    lines += ["", f"Median over the targets: inspector {fixed(med['inspector'], True)}, best table model "
              f"({best}) {fixed(med[best], True)}: the inspector is {lower:.0%} lower "
              f"({'meets' if lower >= margin else 'misses'} the {margin:.0%} bar).", ""]
    return lines
