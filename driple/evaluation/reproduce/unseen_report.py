"""The report's tables for a model of an unseen family: what the shipped inspector applies, how
it covers, and what ``scripts/calibrate_unseen_families.py`` shipped.
"""
from __future__ import annotations

from driple.evaluation.reproduce.coverage import other_families_coverage_of
from driple.evaluation.reproduce.outofzoo import outofzoo_label
from driple.evaluation.reproduce.tables import percent
from driple.evaluation.reproduce.unseen import outofzoo_other_families, outofzoo_unseen_modes


def report_unseen(acc: dict | None, oozs: list, level: str = "##", shipped: dict | None = None,
                   figures: dict | None = None) -> list[str]:
    """What the shipped inspector does for a model of a family it did not train on (a user's
    model): its seen-family intervals against intervals calibrated on held-out families (what
    it ships), and the alternative of also joining the roofline as chosen on held-out families
    (:func:`unseen_modes`), each measured cross-fitted on the held-out families; the out-of-zoo
    sets (``oozs``) with their setting's calibration from all its folds. ``level``: the heading's
    markdown level (``###`` in a model card). ``shipped``: per setting, whether its checkpoint
    joins the modes (:func:`shipped_unseen_modes`); a setting not in it, as the rule of
    ``calibrate_unseen_families.py --roofline-modes auto`` decides."""
    from driple.inspector.scores import table_summary
    from driple.predict.unseen import modes_ship

    def median(table) -> float | None:
        return table_summary(table)["mape_median"] if table else None

    def row(name, rep, other, modes_check, shipped):
        mine = rep["scores"]["inspector"]
        modes_scores = (modes_check or {}).get("scores") or {}
        return [name, str(rep["n_test"]), percent(mine["step_time"]["mape"]), percent(median(mine)),
                percent(100 * rep["coverage"]["inspector"]["mean"]), percent(None if other is None else 100 * other),
                percent((modes_scores.get("step_time") or {}).get("mape")), percent(median(modes_scores)),
                percent(None if not modes_check else 100 * modes_check["coverage"]["mean"]),
                "modes and intervals" if shipped else "intervals"]

    rows, modes, nested, ships = [], [], [], {}
    for setting, r in ((acc or {}).get("settings") or {}).items():
        rep = r.get("family") or {}
        if not rep.get("family_intervals"):
            continue
        unseen = rep.get("unseen_modes") or {}
        ships[setting] = (shipped or {}).get(setting, modes_ship(rep))
        rows.append(row(f"{setting}, held-out families", rep, other_families_coverage_of(rep),
                        unseen.get("cross_fitted"), ships[setting]))
        if "calibration" in unseen:
            joins = ", ".join(f"{t} {m}" for t, m in unseen["calibration"]["modes"].items() if m != "inspector")
            verb = "joins" if ships[setting] else "would join"
            modes.append(f"- {setting} ({'modes shipped' if ships[setting] else 'no modes shipped'}: cross-fitted median "
                         f"MAPE {percent(median(unseen['cross_fitted']['scores']))} with them, "
                         f"{percent(median(rep['scores']['inspector']))} as is): the roofline {verb} "
                         f"{joins or 'nothing'}")
        if unseen.get("nested"):
            n = unseen["nested"]
            nested.append(f"- {setting}: modes taken for {n['chosen'].count('modes')} of {len(n['chosen'])} "
                          f"families; step time {percent(n['scores']['step_time']['mape'])}, median MAPE "
                          f"{percent(median(n['scores']))}")
    if not rows:
        return []
    for ooz in oozs:
        rows.append(row(outofzoo_label(ooz), ooz, outofzoo_other_families(acc, ooz),
                        outofzoo_unseen_modes(acc, ooz), ships.get(ooz.get("setting"), False)))
    return [f"{level} A model of a family the inspector did not train on", "",
            "A user's model belongs to no family the inspector trained on. For such a job the shipped "
            "inspector's intervals are calibrated on the residuals of held-out families "
            "(`family_intervals`; `scripts/calibrate_unseen_families.py` writes them into the "
            "checkpoints, `driple.predict.unseen`), not on its seen-family calibration jobs; its "
            "prediction is the one for a seen family unless its setting ships roofline modes (below). Coverage measured cross-fitted (each held-out "
            "family with the intervals of the other families' folds; the out-of-zoo jobs, never used, "
            "with the source's intervals from all its folds). Also measured: joining the roofline per "
            "duration as chosen on the held-out families (\"with roofline modes\", cross-fitted the "
            "same way, intervals calibrated with the modes applied); shipped for a setting where it "
            "wins cross-fitted, a lower median MAPE than the inspector as it is "
            "(`scripts/calibrate_unseen_families.py`, `--roofline-modes auto`). Last column: what "
            "the shipped inspector applies to such a job.", "",
            "| test set | jobs | step time | median MAPE | coverage, seen-family intervals | coverage, "
            "unseen-family intervals | step time, with roofline modes | median MAPE, with "
            "roofline modes | coverage, with roofline modes | shipped |",
            "|---|---|---|---|---|---|---|---|---|---|", *("| " + " | ".join(r) + " |" for r in rows), "",
            *(["Roofline modes chosen on all held-out families with the evaluation's roofline "
               "(`roofline`: replaces the inspector's prediction; `mean`: geometric mean of the two; "
               "what ships, with which rooflines, is in the last table):", "", *modes, ""] if modes else []),
            *(["Modes or not, decided for each held-out family on the other families alone (a nested "
               "choice: the median MAPE of the modes cross-fitted over the other folds against the "
               "inspector as it is on them), then applied to it:", "", *nested, ""] if nested else []),
            *report_unseen_shipped(figures, list(ships))]


def report_unseen_shipped(figures: dict | None, settings: list) -> list[str]:
    """What ``calibrate_unseen_families.py`` shipped (``unseen_families.json``): per setting the
    roofline sets offered with their cross-fitted figures, the one shipped, the nested estimate
    of the whole rule and the out-of-zoo sets (never used to choose)."""
    rows = []
    for setting in settings:
        f = ((figures or {}).get("settings") or {}).get(setting)
        if not f or not f.get("roofline_sets"):
            continue
        sets = f["roofline_sets"]
        shown = lambda n: (f"{percent(sets[n]['step_time_mape'])} / {percent(sets[n]['median_mape'])}" if n in sets else "-")
        four = next((n for n in sets if n != "all"), None)
        joined = {m.partition(":")[2] or "own" for m in f["modes"].values() if m != "inspector"}
        shipped = ("none" if not joined else "all (evaluation's)" if joined == {"all"} else ", ".join(sorted(joined)))
        n, ooz = f.get("nested") or {}, (f.get("out_of_zoo") or [{}])[0]
        cross = f["cross_fitted"] if joined else f["as_is"]
        rows.append([setting, shown("all"), shown(four) if four else "-", shipped,
                     percent(cross["step_time_mape"]), percent(cross["median_mape"]),
                     percent(n.get("step_time_mape")), percent(n.get("median_mape")),
                     percent(ooz.get("step_time_mape")), percent(ooz.get("median_mape")),
                     percent(None if ooz.get("coverage") is None else 100 * ooz["coverage"])])
    if not rows:
        return []
    return ["What ships (`python scripts/calibrate_unseen_families.py`, `unseen_families.json`): a mode "
            "joins the roofline it was chosen with, carried in the checkpoint. Offered per setting: "
            "the evaluation's own roofline (all terms, no overlap) alone, or four variants (all or "
            "physical terms, with or without the overlap), each target taking the best of them; the "
            "set with the lower cross-fitted median MAPE, if it beats the inspector as it is, ships. "
            "Figures: held-out families cross-fitted (step time / median MAPE); nested: the whole rule, "
            "the set (or none) decided for each family on the other families alone; out of zoo: the "
            "shipped inspector on its setting's out-of-zoo set, never used to choose (step time, "
            "median MAPE, coverage of the unseen-family intervals).", "",
            "| setting | evaluation's roofline | four variants | shipped rooflines | step time | median MAPE "
            "| nested step time | nested median | out of zoo step time | out of zoo median | out of zoo coverage |",
            "|---|---|---|---|---|---|---|---|---|---|---|", *("| " + " | ".join(r) + " |" for r in rows), ""]
