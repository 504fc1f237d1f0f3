"""Give the shipped inspectors their calibration for model families they did not train on.

    python scripts/calibrate_unseen_families.py                  # every evaluated setting
    python scripts/calibrate_unseen_families.py --evaluation DIR --settings cpu-ddp-w2-lo --json

A user's model is of no family the inspector trained on, and the intervals calibrated on its
seen-family calibration jobs are too narrow there (they cover 82-88 % of held-out families'
jobs). This writes into each shipped checkpoint (``unseen_family``) the intervals the evaluation
calibrated on the residuals of its leave-one-family-out held-out jobs (``accuracy.json``,
``settings.<setting>.family.family_intervals``, from ``python scripts/reproduce.py --sections
accuracy``), the families the inspector trained on (its split's train and validation jobs, and
its transfer source's) and the coverage the evaluation measured for them cross-fitted (each
family with the intervals of the other families' folds). ``driple predict`` then uses them for
every job of another family. The registry entry's checksum is renewed; nothing else changes.

The roofline modes chosen on the held-out families (``unseen_modes``: how the roofline joins
each duration's prediction) go in too where they win cross-fitted: a lower median MAPE over the
held-out families than the inspector as it is (``--roofline-modes auto``, the default; the rule
whose outcome results.md measures as the "nested choice"). ``--roofline-modes always`` / ``never``
overrule it.

Run it after the evaluation that produced the calibration, on the inspectors that evaluation
evaluated (the same checkpoints: the calibration is of their configuration and training jobs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's driple and its trained_models/, not an installed one


def training_families(inspector, registry_root: str, seen: tuple = ()) -> set:
    """Families of the inspector's split's train and validation jobs (its dataset's
    ``results.csv``), with its transfer source's (by the registry)."""
    import pandas as pd

    from driple.errors import DripleError
    from driple.inspector.checkpoint import load_inspector
    from driple.predict.registry import resolve

    info = inspector.info
    split, dataset = info.get("split") or {}, info.get("dataset")
    if not split or not dataset:
        raise DripleError(f"the {inspector.setting} inspector records no split or dataset: its training families are unknown")
    path = dataset if os.path.isabs(dataset) else os.path.join(ROOT, dataset)
    frame = pd.read_csv(os.path.join(path, "results.csv"), usecols=["job_id", "family"])
    family = dict(zip(frame["job_id"].astype(str), frame["family"].astype(str)))
    jobs = list(split.get("train") or []) + list(split.get("val") or [])
    missing = [j for j in jobs if j not in family]
    if missing:
        raise DripleError(f"{len(missing)} training job(s) of the {inspector.setting} inspector are not in "
                          f"{path}/results.csv (e.g. {missing[0]})")
    out = {family[j] for j in jobs}
    source = (info.get("transfer") or {}).get("from_setting")
    if source and source not in seen:
        src_path, _ = resolve(source, root=registry_root)
        out |= training_families(load_inspector(str(src_path)), registry_root, seen + (inspector.setting,))
    return out


MODES_CHOICES = ("auto", "always", "never")


def ships_modes(family: dict, roofline_modes: str) -> bool:
    """Whether the roofline modes go in: ``always``, ``never``, or (``auto``) where the evaluation
    has them and they win cross-fitted (:func:`driple.predict.unseen.modes_ship`)."""
    from driple.predict.unseen import modes_ship

    if roofline_modes != "auto":
        return roofline_modes == "always"
    return modes_ship(family)


def attach(setting: str, accuracy: dict, models_dir: str, file: str, roofline_modes: str = "auto") -> dict:
    """Write ``setting``'s calibration from ``accuracy`` (read from ``file``) into its shipped
    checkpoint; returns what was written (without the intervals' arrays)."""
    from driple.errors import DripleError
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.scores import table_summary
    from driple.predict.unseen import UnseenFamilyCalibration
    from driple.predict.registry import load_registry, register, resolve

    if roofline_modes not in MODES_CHOICES:
        raise DripleError(f"--roofline-modes is one of {', '.join(MODES_CHOICES)}, not {roofline_modes!r}")
    entry = ((accuracy.get("settings") or {}).get(setting) or {})
    family = entry.get("family") or {}
    unseen = family.get("unseen_modes") or {}
    with_modes = ships_modes(family, roofline_modes)
    if with_modes:
        if "calibration" not in unseen:
            raise DripleError(f"the evaluation has no roofline modes for {setting} "
                              f"({unseen.get('error') or 'no family split with the roofline'})")
        modes, intervals = unseen["calibration"]["modes"], unseen["calibration"]["intervals"]
        scores, cover = unseen["cross_fitted"]["scores"], unseen["cross_fitted"]["coverage"].get("mean")
        stamp = unseen
    else:
        intervals = family.get("family_intervals")
        if not intervals:
            raise DripleError(f"the evaluation has no held-out-family intervals for {setting}; "
                              "run python scripts/reproduce.py --sections accuracy (family split)")
        modes, scores, stamp = {}, family["scores"]["inspector"], entry
        cover = ((family.get("coverage_other_families") or {}).get("inspector") or {}).get("mean")
    path, reg_entry = resolve(setting, root=models_dir)
    inspector = load_inspector(str(path))
    summary = table_summary(scores)
    rel = os.path.relpath(file, ROOT)
    source = {"file": file if rel.startswith("..") else rel, "date": stamp.get("date"),
              "command": stamp.get("command"), "folds": len(family.get("folds") or []),
              "coverage": cover, "step_time_mape": summary["step_time_mape"],
              "median_mape": summary["mape_median"],
              "how": "intervals" + (" and roofline modes" if with_modes else "")
                     + " from every held-out family fold; figures cross-fitted (each fold "
                       "calibrated on the other folds)"}
    if "cross_fitted" in unseen and (family.get("scores") or {}).get("inspector"):
        source["roofline_modes"] = {  # the figures the choice was made on
            "rule": roofline_modes, "shipped": with_modes,
            "median_mape_with": table_summary(unseen["cross_fitted"]["scores"])["mape_median"],
            "median_mape_as_is": table_summary(family["scores"]["inspector"])["mape_median"]}
    calibration = UnseenFamilyCalibration(modes, intervals, sorted(training_families(inspector, models_dir)), source)
    inspector.info["unseen_family"] = calibration.to_dict()
    inspector.save(os.path.dirname(str(path)))
    keep = {k: reg_entry[k] for k in ("description", "trained", "scores", "card", "hardware", "resident")
            if reg_entry.get(k) is not None}
    default = load_registry(Path(models_dir)).get("default") == setting
    register(setting, path, root=models_dir, default=default, **keep)
    return {"setting": setting, "modes": calibration.modes, "families": list(calibration.families), **source}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--evaluation", default=os.path.join(ROOT, "trained_models", "evaluation"),
                   help="directory of the evaluation's accuracy.json (default trained_models/evaluation)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"),
                   help="the shipped inspectors and their registry (default trained_models)")
    p.add_argument("--settings", nargs="*", default=None, help="only these settings (default: every one evaluated)")
    p.add_argument("--roofline-modes", nargs="?", const="always", default="auto", choices=MODES_CHOICES,
                   help="ship the roofline modes chosen on the held-out families: auto (default) where "
                        "they win cross-fitted (lower median MAPE than the inspector as it is), always "
                        "(the bare flag), never")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    a = p.parse_args(argv)
    from driple.errors import DripleError

    try:
        file = os.path.join(a.evaluation, "accuracy.json")
        try:
            with open(file) as f:
                accuracy = json.load(f)
        except (OSError, ValueError) as err:
            raise DripleError(f"cannot read {file}: {err}") from None
        settings = a.settings or sorted(accuracy.get("settings") or {})
        done = [attach(s, accuracy, a.models_dir, os.path.abspath(file), a.roofline_modes) for s in settings]
    except DripleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(done, indent=2))
    else:
        for d in done:
            modes = ", ".join(f"{t} {m}" for t, m in d["modes"].items() if m != "inspector")
            check = d.get("roofline_modes")
            why = "" if not check else (
                f" (cross-fitted median MAPE {check['median_mape_with']:.2f} % with them, "
                f"{check['median_mape_as_is']:.2f} % as is)")
            print(f"{d['setting']}: {len(d['families'])} training families"
                  + (f"; roofline joins {modes}{why}" if modes else
                     f"; no roofline modes{why}" if check else "")
                  + f"; on {d['folds']} held-out families: step time MAPE {d['step_time_mape']:.1f} %, "
                  f"median MAPE {d['median_mape']:.1f} %, interval coverage {d['coverage']:.1%} (cross-fitted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
