"""Give the shipped inspectors their calibration for model families they did not train on.

    python scripts/calibrate_unseen_families.py                  # every shipped setting
    python scripts/calibrate_unseen_families.py --evaluation DIR --settings cpu-ddp-w2-lo --json

Reads each setting's leave-one-family-out calibration from the evaluation's ``accuracy.json``
(``settings.<setting>.family.unseen_family``, written by ``python scripts/reproduce.py
--sections accuracy``: roofline modes over the inspector as it is and intervals, from jobs of
families the fold's models had not seen; :mod:`driple.inspector.unseen`), adds the families
the shipped inspector trained on (its split's train and validation jobs, and its transfer
source's), and writes it into the checkpoint (``unseen_family``) with the cross-fitted figures
the evaluation measured. The registry entry's checksum is renewed; nothing else changes.
``driple predict`` then uses it for every job of another family (a user's model).

Run it after the evaluation that produced the calibration, on the inspectors that evaluation
evaluated (the same checkpoints: the calibration is of their configuration and training jobs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def attach(setting: str, accuracy: dict, models_dir: str, file: str) -> dict:
    """Write ``setting``'s calibration from ``accuracy`` into its shipped checkpoint; returns
    what was written (without the intervals' arrays)."""
    from driple.errors import DripleError
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.scores import table_summary
    from driple.inspector.unseen import UnseenFamilyCalibration
    from driple.predict.registry import register, resolve

    entry = ((accuracy.get("settings") or {}).get(setting) or {})
    unseen = (entry.get("family") or {}).get("unseen_family")
    if not unseen or "calibration" not in unseen:
        why = (unseen or {}).get("error") or "no family split with the inspector and the roofline"
        raise DripleError(f"the evaluation has no unseen-family calibration for {setting} ({why}); "
                          "run python scripts/reproduce.py --sections accuracy")
    path, reg_entry = resolve(setting, root=models_dir)
    inspector = load_inspector(str(path))
    check = unseen["cross_fitted"]
    summary = table_summary(check["scores"])
    rel = os.path.relpath(file, ROOT)
    source = {"file": file if rel.startswith("..") else rel, "date": unseen.get("date") or entry.get("date"),
              "command": unseen.get("command") or entry.get("command"),
              "folds": len(entry["family"].get("folds") or []),
              "coverage": check["coverage"].get("mean"), "step_time_mape": summary["step_time_mape"],
              "median_mape": summary["mape_median"],
              "how": "modes and intervals from every held-out family fold; figures cross-fitted "
                     "(each fold calibrated on the other folds)"}
    calibration = UnseenFamilyCalibration(unseen["calibration"]["modes"], unseen["calibration"]["intervals"],
                                          sorted(training_families(inspector, models_dir)), source)
    inspector.info["unseen_family"] = calibration.to_dict()
    inspector.save(os.path.dirname(str(path)))
    keep = {k: reg_entry[k] for k in ("description", "trained", "scores", "card", "hardware", "resident")
            if reg_entry.get(k) is not None}
    reg = json.load(open(os.path.join(models_dir, "registry.json")))
    register(setting, path, root=models_dir, default=reg.get("default") == setting, **keep)
    return {"setting": setting, "modes": calibration.modes, "families": list(calibration.families), **source}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--evaluation", default=os.path.join(ROOT, "trained_models", "evaluation"),
                   help="directory of the evaluation's accuracy.json (default trained_models/evaluation)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"),
                   help="the shipped inspectors and their registry (default trained_models)")
    p.add_argument("--settings", nargs="*", default=None, help="only these settings (default: every one evaluated)")
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
        done = [attach(s, accuracy, a.models_dir, os.path.abspath(file)) for s in settings]
    except DripleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(done, indent=2))
    else:
        for d in done:
            modes = ", ".join(f"{t} {m}" for t, m in d["modes"].items() if m != "inspector") or "none"
            print(f"{d['setting']}: {len(d['families'])} training families; roofline joins {modes}; "
                  f"cross-fitted on {d['folds']} held-out families: step time MAPE {d['step_time_mape']:.1f} %, "
                  f"median MAPE {d['median_mape']:.1f} %, interval coverage {d['coverage']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
