"""Models of a family the inspector did not train on: roofline modes and intervals chosen on the
held-out families, checked cross-fitted and on the out-of-zoo sets.
"""
from __future__ import annotations

import numpy as np

from driple.evaluation.reproduce.context import run_stamp


def unseen_modes(report: dict, nominal: float) -> dict | None:
    """On a family split with the inspector and the roofline, an alternative to shipping the
    held-out-family intervals alone (:func:`held_out_intervals`, what
    ``scripts/calibrate_unseen_families.py`` ships): also the roofline modes chosen on every
    fold's held-out jobs (:mod:`driple.predict.unseen`), and the procedure cross-fitted (each
    fold calibrated on the other folds only). Kept to measure it; None without both estimators
    or with fewer than 3 folds."""
    from driple.errors import DripleError
    from driple.inspector.evaluate import to_json
    from driple.predict.unseen import calibrate, cross_fitted, nested_choice, pooled

    folds = report["folds"]
    if len(folds) < 3 or not {"inspector", "roofline"} <= set(report["estimators"]):
        return None
    held = [{"measured": f["measured"], "inspector": f["predictions"]["inspector"],
             "roofline": f["predictions"]["roofline"]} for f in folds]
    everything = pooled(held)
    try:
        shipped = calibrate(report["targets"], everything["measured"], everything["inspector"],
                            everything["roofline"], families=(), coverage=nominal)
        check = cross_fitted(report["targets"], held, nominal)
        nested = nested_choice(report["targets"], held, nominal) if len(folds) >= 4 else None
        if nested:  # its predictions are the held-out rows below, joined as it chose
            nested = {k: v for k, v in nested.items() if k != "predicted"}
    except DripleError as err:  # too few held-out jobs for a target
        return {"error": str(err)}
    # the held-out predictions themselves (folds' test jobs in order): later analyses of the
    # unseen-family case need no retraining
    return {"calibration": {"modes": shipped.modes, "intervals": shipped.intervals.to_dict()},
            "cross_fitted": check, "nested": nested, "held_out": {k: to_json(v) for k, v in everything.items()},
            **run_stamp()}


def outofzoo_other_families(acc: dict | None, ooz: dict) -> float | None:
    """Mean coverage on the out-of-zoo jobs of the source inspector's intervals calibrated on its
    held-out families (accuracy section, ``family_intervals``); None without either."""
    from driple.inspector.evaluate import rows_array
    from driple.predict.intervals import ConformalIntervals, coverage

    setting = ooz.get("setting")
    record = ((((acc or {}).get("settings") or {}).get(setting) or {}).get("family") or {}).get("family_intervals")
    held = ooz.get("inspector_predictions")
    if not record or not held:
        return None
    ints = ConformalIntervals.from_dict(record)
    low, high = ints.interval(np.clip(np.asarray(held["predicted"], dtype=float), 0, None))
    measured = rows_array(held["measured"])
    return coverage(measured, low, high, names=list(ints.names))["mean"]


def outofzoo_unseen_modes(acc: dict | None, ooz: dict) -> dict | None:
    """The out-of-zoo jobs as the source inspector would predict them with the roofline modes
    chosen on its held-out families (:func:`unseen_modes`): its prediction as it is joined with
    the roofline, that calibration's intervals: ``{"scores", "coverage"}``; None without either."""
    from driple.inspector.evaluate import rows_array
    from driple.inspector.scores import score_table
    from driple.predict.unseen import UnseenFamilyCalibration
    from driple.predict.intervals import coverage

    setting = ooz.get("setting")
    unseen = ((((acc or {}).get("settings") or {}).get(setting) or {}).get("family") or {}).get("unseen_modes") or {}
    held = ooz.get("inspector_predictions") or {}
    if "calibration" not in unseen or "roofline" not in held:
        return None

    cal = UnseenFamilyCalibration(unseen["calibration"]["modes"], unseen["calibration"]["intervals"], ())
    names = list(cal.intervals.names)
    y = rows_array(held["measured"])
    joined = np.clip(cal.join(rows_array(held["predicted"]), rows_array(held["roofline"]), names), 0, None)
    low, high = cal.intervals.interval(joined)
    return {"scores": score_table(y, joined, names), "coverage": coverage(y, low, high, names=names)}


def shipped_unseen_modes(ctx: "Context", settings) -> dict:
    """``{setting: True}`` where the shipped checkpoint joins roofline modes for unseen families
    (what ``calibrate_unseen_families.py`` wrote, whatever rule it was run with)."""
    from driple.errors import DripleError
    from driple.predict.unseen import joined_modes

    out = {}
    for setting in settings:
        try:
            info = ctx.inspector(setting).info
        except (DripleError, OSError):  # not shipped here: the rule says it
            continue
        out[setting] = bool(joined_modes((info.get("unseen_family") or {}).get("modes")))
    return out
