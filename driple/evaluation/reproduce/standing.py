"""The accuracy bars in one table: held-out families per setting and the out-of-zoo sets.
"""
from __future__ import annotations

import numpy as np

from driple.evaluation.reproduce.coverage import other_families_coverage_of
from driple.evaluation.reproduce.outofzoo import outofzoo_label
from driple.evaluation.reproduce.tables import medians, percent, table_models
from driple.evaluation.reproduce.unseen import outofzoo_other_families


#: The accuracy bars: the inspector's median per-target MAPE this much below the best table
#: model's on held-out families; step time MAPE at most this on held-out families / out of zoo.
BAR_LOWER, BAR_STEP_FAMILY, BAR_STEP_OUTOFZOO = 0.25, 10.0, 15.0


def standing_row(name: str, rep: dict, step_bar: float | None, other_families: bool = True) -> str:
    """One row of :func:`report_standing` for an evaluated split (``mape`` in %; no step-time
    bar: None)."""
    s = rep["scores"]
    step = {m: s[m].get("step_time", {}).get("mape") for m in ("inspector", "roofline", "analytic", "hgb-priors")
            if m in s}
    floor = ((rep.get("floor_check") or {}).get("mape") or {})
    over = [t for t, fl in floor.items() if fl.get("ratio") is not None and not fl.get("within")]
    cov = (rep.get("coverage") or {}).get("inspector", {}).get("mean")
    cells = [name, str(rep["n_test"])]
    if table_models(rep) and "inspector" in s:
        med, best = medians(rep)
        lower = 1 - med["inspector"] / med[best] if med[best] else float("nan")
        cells += [percent(med["inspector"]), f"{percent(med[best])} ({best})", f"{lower:.0%}"]
    else:
        cells += ["-", "-", "-"]
    mine = step.get("inspector")
    if mine is None or step_bar is None:
        cells.append(percent(mine))
    else:
        cells.append(f"{percent(mine)}{' ✓' if mine <= step_bar else ''} (bar {step_bar:.0f}%)")
    cells += [percent(step.get(m)) for m in ("roofline", "analytic", "hgb-priors")]
    fl = (floor.get("step_time") or {}).get("floor")
    cells.append(percent(fl))
    cells.append(percent(None if cov is None else 100 * cov))
    if other_families:
        other = other_families_coverage_of(rep)
        cells.append(percent(None if other is None else 100 * other))
    cells.append(", ".join(over) if over else ("none" if floor else "-"))
    return "| " + " | ".join(cells) + " |"


def report_standing(acc: dict | None, oozs: list) -> list[str]:
    """The accuracy bars in one table: held-out families per setting and the out-of-zoo sets (the
    step-time bar on the source setting's)."""
    sets = [(f"{setting}, held-out families", r["family"], BAR_STEP_FAMILY)
            for setting, r in ((acc or {}).get("settings") or {}).items() if r.get("family")]
    for ooz in oozs:
        other = outofzoo_other_families(acc, ooz)
        if other is not None:
            ooz = {**ooz, "coverage_other_families": {"inspector": {"mean": other}}}
        bar = BAR_STEP_OUTOFZOO if ooz.get("source", True) else None
        sets.append((outofzoo_label(ooz), ooz, bar))
        if ooz.get("drift"):  # the same set on its dataset's host (:func:`session_drift`)
            sets.append((outofzoo_label(ooz) + ", host drift corrected",
                         {**ooz, "scores": ooz["drift"]["scores"], "coverage": None,
                          "coverage_other_families": None}, bar))
    if not sets:
        return []
    other = any(other_families_coverage_of(rep) is not None for _, rep, _ in sets)  # runs before s29: none
    rows = [standing_row(name, rep, bar, other) for name, rep, bar in sets]
    medians = []
    names = list(dict.fromkeys(m for _, rep, _ in sets for m in rep["estimators"]))
    for name, rep, _ in sets:
        cells = []
        for m in names:
            vals = [rep["scores"][m][t]["mape"] for t in rep["targets"]
                    if m in rep["scores"] and rep["scores"][m][t]["mape"] is not None]
            cells.append(f"{np.median(vals):.1f}%" if vals else "-")
        medians.append(f"| {name} | " + " | ".join(cells) + " |")
    tail = ["Median over the targets each estimator predicts (MAPE; `analytic`: step time only, "
            "`roofline`: the durations and step time only):", "",
            "| test set | " + " | ".join(names) + " |", "|---|" + "---|" * len(names), *medians, ""]
    return ["## Against the bars: unseen families, step time, intervals", "",
            f"Median per-target MAPE of the inspector and of the best table model (bar: the "
            f"inspector {BAR_LOWER:.0%} lower on the source's held-out families); step time MAPE of "
            "the inspector (bars: held-out families, out of zoo) beside the roofline, the one-factor "
            "analytic model and hgb-priors, and the step time's noise floor; the inspector's 90% "
            "interval coverage, calibrated on each fold's calibration jobs (seen families, as "
            "shipped)" + (" and on the other folds' held-out families" if other else "")
            + "; the labels whose best estimator is over 2x their noise floor.", "",
            "| test set | jobs | inspector median | best table model | lower by | step time | roofline "
            "| analytic | hgb-priors | step floor | coverage | "
            + ("coverage, calibrated on unseen families | " if other else "") + "labels over 2x floor |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if other else ""), *rows, "", *tail]
