"""The calibration for model families an inspector did not train on, written into the shipped
checkpoints (``scripts/calibrate_unseen_families.py`` parses its options and calls
:func:`ship_unseen_families`; its docstring says what is written and why): the intervals
calibrated on the evaluation's held-out families, the training families, and the roofline
modes where they win cross-fitted; the figures into ``unseen_families.json``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from driple.zoo.workload import checkout_root

ROOT = str(checkout_root())  # datasets and evaluation files are recorded relative to the checkout


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
#: The sets of rooflines (:data:`driple.predict.unseen.ROOFLINE_VARIANTS`) offered: the
#: evaluation's own (all terms, no overlap) alone, or all four; the one with the lowest
#: cross-fitted median wins, as the modes against the inspector as it is.
DEFAULT_SETS = (("all",), ("all", "all-overlap", "physical", "physical-overlap"))
#: Where the figures go, beside accuracy.json (read by ``reproduce.py --report``).
FIGURES = "unseen_families.json"


def write_figures(file: str, done: list, accuracy: dict, argv=None) -> None:
    """``unseen_families.json``: per setting what ships for unseen families and its figures."""
    from driple.collect.provenance import script_stamp

    record = {"section": "unseen_families", **script_stamp("calibrate_unseen_families.py", argv),
              "evaluation_date": accuracy.get("date"),
              "settings": {d["setting"]: {"modes": d["modes"], "how": d["how"], **d["figures"]} for d in done}}
    old = {}
    if os.path.exists(file):  # a run on some settings keeps the others'
        try:
            with open(file) as f:
                old = json.load(f).get("settings") or {}
        except (OSError, ValueError) as err:
            print(f"warning: {file} could not be read ({err}); written again with these settings only",
                  file=sys.stderr)
            old = {}
    record["settings"] = {**old, **record["settings"]}
    with open(file, "w") as f:
        json.dump(record, f, indent=1, default=float)
        f.write("\n")


def variant_folds(setting: str, family: dict, inspector, variants) -> tuple:
    """The evaluation's held-out families of ``setting`` as :func:`driple.predict.unseen.cross_fitted`
    folds, each ``roofline`` a ``{variant: predictions}`` of rooflines fitted again on the fold's
    training jobs (the family split of the evaluation's seed), and the dataset read. Refused when
    the evaluation's own roofline does not come out the same (the data or the code changed)."""
    from driple.errors import DripleError
    from driple.inspector.evaluate import own_jobs, rows_array
    from driple.inspector.roofline_estimator import RooflineEstimator
    from driple.inspector.splits import family_split
    from driple.predict.unseen import ROOFLINE_VARIANTS

    held = (family.get("unseen_modes") or {}).get("held_out")
    if not held or not family.get("folds"):
        raise DripleError(f"the evaluation kept no held-out predictions of {setting}'s inspector and roofline; "
                          "run python -m driple.evaluation --sections accuracy --write-shipped (family split)")
    arrays = {k: rows_array(held[k]) for k in ("measured", "inspector", "roofline")}
    ds, own = own_jobs(inspector)
    index = {j: i for i, j in enumerate(ds.job_ids)}
    folds, start = [], 0
    for fold in family["folds"]:
        ids = list(fold["test_job_ids"])
        missing = [j for j in ids if j not in index]
        split = family_split(ds, fold["held_out"], family.get("seed", 0))
        if missing or sorted(index[j] for j in ids) != sorted(split.test):
            raise DripleError(f"{setting}: the held-out jobs of {fold['held_out']} are not the dataset's "
                              f"family split any more; run the evaluation again")
        test, part = [index[j] for j in ids], slice(start, start + len(ids))
        start += len(ids)
        rooflines = {v: RooflineEstimator(**ROOFLINE_VARIANTS[v], messages=own_messages(inspector)).fit(
                         ds, split.train).predict(ds, test)
                     for v in sorted(set(variants) | {"all"})}
        if not np.allclose(rooflines["all"], arrays["roofline"][part], rtol=1e-6, equal_nan=True):
            raise DripleError(f"{setting}: the roofline fitted again on {fold['held_out']}'s training jobs is not "
                              "the evaluation's (the data or the code changed); run the evaluation again")
        folds.append({"measured": arrays["measured"][part], "inspector": arrays["inspector"][part],
                      "roofline": {v: rooflines[v] for v in variants}})
    return folds, ds, own


def shipped_members(inspector, ds, split, variants) -> dict:
    """``{variant: RooflineMember}`` fitted on the inspector's own training jobs, as its own
    roofline is (:func:`driple.inspector.ensemble.fit_roofline`)."""
    from driple.inspector.ensemble import fit_roofline
    from driple.predict.unseen import ROOFLINE_VARIANTS

    return {v: fit_roofline(inspector, ds, split, **ROOFLINE_VARIANTS[v], messages=own_messages(inspector))
            for v in variants}


#: Targets whose nested held-out predictions are kept per job: the step a held-out family is
#: given (what the memory cycle's durations are scored with, ``scripts/fit_memory.py``) and the
#: memory durations they are compared with.
KEPT_PER_JOB = ("step_time", "memory_burst_duration", "memory_idle_duration")


def nested_held_out(nested: dict, folds: list, targets: list) -> dict:
    """``{"per_job": {target: {job_id: value}}, "mape": {target: MAPE}}`` of the nested rule's
    held-out predictions for :data:`KEPT_PER_JOB` (the folds' test jobs, in their order)."""
    ids = [str(j) for fold in folds for j in fold["test_job_ids"]]
    kept = [t for t in KEPT_PER_JOB if t in targets]
    return {"per_job": {t: dict(zip(ids, (float(v) for v in nested["predicted"][:, targets.index(t)])))
                        for t in kept},
            "mape": {t: nested["scores"][t]["mape"] for t in kept}}


def own_messages(inspector) -> bool:
    """Whether the rooflines fitted again for ``inspector`` take the cost per message: as its own
    roofline was fitted (a checkpoint from before the term refits without it, so that its
    evaluation's held-out rooflines come out the same); with it where it has none."""
    return bool(inspector.roofline.messages) if inspector.roofline is not None else True


def out_of_zoo_figures(calibration, inspector, evaluation_dir: str, setting: str) -> list:
    """The shipped calibration on each out-of-zoo set of ``setting`` the evaluation scored
    (``outofzoo*.json``: the inspector's predictions as they were): step time and median MAPE,
    coverage of the unseen-family intervals. Never used to choose; reported only."""
    import glob

    from driple.inspector.dataset import dataset_built_as
    from driple.inspector.evaluate import rows_array
    from driple.inspector.scores import score_table, table_summary
    from driple.predict.intervals import coverage

    out = []
    for file in sorted(glob.glob(os.path.join(evaluation_dir, "outofzoo*.json"))):
        with open(file) as f:
            ooz = json.load(f)
        held = ooz.get("inspector_predictions")
        if ooz.get("setting") != setting or not held or not ooz.get("out_of_zoo"):
            continue
        root = ooz["out_of_zoo"] if os.path.isabs(ooz["out_of_zoo"]) else os.path.join(ROOT, ooz["out_of_zoo"])
        ds = dataset_built_as(inspector, root)
        index = {j: i for i, j in enumerate(ds.job_ids)}
        graphs = [ds[index[j]] for j in ooz["folds"][0]["test_job_ids"]]
        measured, as_is = rows_array(held["measured"]), rows_array(held["predicted"])
        targets = list(ooz["targets"])
        joined = np.clip(calibration.join(as_is, calibration.roofline_predictions(graphs, own=inspector.roofline),
                                          targets), 0, None)
        low, high = calibration.intervals.interval(joined)
        with_, was = table_summary(score_table(measured, joined, targets)), table_summary(score_table(measured, as_is, targets))
        out.append({"file": os.path.relpath(file, ROOT), "jobs": len(graphs),
                    "step_time_mape": with_["step_time_mape"], "median_mape": with_["mape_median"],
                    "step_time_mape_as_is": was["step_time_mape"], "median_mape_as_is": was["mape_median"],
                    "coverage": coverage(measured, low, high, names=targets)["mean"]})
    return out


def attach(setting: str, accuracy: dict, models_dir: str, file: str, roofline_modes: str = "auto",
           sets=None, rule: str = "median") -> dict:
    """Write ``setting``'s calibration from ``accuracy`` (read from ``file``) into its shipped
    checkpoint; returns what was written (without the intervals' arrays) and the figures."""
    from driple.errors import DripleError
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.scores import score_table, table_summary
    from driple.predict.unseen import (ROOFLINE_VARIANTS, UnseenFamilyCalibration, best_option, calibrate,
                                       nested_choice, pooled, rule_score)
    from driple.predict.registry import load_registry, optional_fields, register, resolve

    if roofline_modes not in MODES_CHOICES:
        raise DripleError(f"--roofline-modes is one of {', '.join(MODES_CHOICES)}, not {roofline_modes!r}")
    sets = [tuple(s) for s in (sets or DEFAULT_SETS)]
    if not all(sets):
        raise DripleError("a roofline set names no roofline (--roofline-sets takes comma-separated "
                          f"names of {', '.join(ROOFLINE_VARIANTS)})")
    unknown = sorted({v for s in sets for v in s if v not in ROOFLINE_VARIANTS})
    if unknown:
        raise DripleError(f"unknown roofline variant(s) {', '.join(unknown)}; known: {', '.join(ROOFLINE_VARIANTS)}")
    entry = ((accuracy.get("settings") or {}).get(setting) or {})
    family = entry.get("family") or {}
    path, reg_entry = resolve(setting, root=models_dir)
    inspector = load_inspector(str(path))
    targets = list(family.get("targets") or inspector.targets)
    figures, with_modes, members, best = {}, False, {}, None
    if roofline_modes != "never" or (family.get("unseen_modes") or {}).get("held_out"):
        folds, ds, own = variant_folds(setting, family, inspector, sorted({v for s in sets for v in s}))
        options = {",".join(s): [{**f, "roofline": {v: f["roofline"][v] for v in s}} for f in folds] for s in sets}
        best, checks = best_option(targets, options, rule=rule)
        if best is None and roofline_modes == "always":  # the lowest score, won or not
            best = min(checks, key=lambda n: rule_score(checks[n]["scores"], rule))
        with_modes = best is not None and roofline_modes != "never"
        shown = best or min(checks, key=lambda n: rule_score(checks[n]["scores"], rule))
        check = checks[shown]
        everything = pooled(options[shown])
        as_is = score_table(everything["measured"], everything["inspector"], targets)
        nested = nested_choice(targets, options, rule=rule) if len(folds) >= 4 else None
        members = shipped_members(inspector, ds, own, shown.split(",")) if with_modes else {}
        summary, was = table_summary(check["scores"]), table_summary(as_is)
        figures = {"roofline_sets": {n: {"step_time_mape": table_summary(c["scores"])["step_time_mape"],
                                         "median_mape": table_summary(c["scores"])["mape_median"],
                                         "coverage": c["coverage"]["mean"]} for n, c in checks.items()},
                   "variants": shown.split(","), "folds": len(folds), "jobs": len(everything["measured"]),
                   "cross_fitted": {"step_time_mape": summary["step_time_mape"], "median_mape": summary["mape_median"],
                                    "coverage": check["coverage"]["mean"], "modes": check["modes"]},
                   "as_is": {"step_time_mape": was["step_time_mape"], "median_mape": was["mape_median"]}}
        if nested:
            n = table_summary(nested["scores"])
            figures["nested"] = {"step_time_mape": n["step_time_mape"], "median_mape": n["mape_median"],
                                 "chosen": nested["chosen"], **nested_held_out(nested, family["folds"], targets)}
    if with_modes:
        cal = calibrate(targets, everything["measured"], everything["inspector"], everything["roofline"],
                        families=(), rooflines=members)
        modes, intervals, scores, cover = cal.modes, cal.intervals, check["scores"], check["coverage"]["mean"]
        stamp = {"date": accuracy.get("date"), "command": accuracy.get("command")}
        rooflines = cal.rooflines
    else:
        intervals = family.get("family_intervals")
        if not intervals:
            raise DripleError(f"the evaluation has no held-out-family intervals for {setting}; "
                              "run python -m driple.evaluation --sections accuracy --write-shipped (family split)")
        modes, scores, stamp, rooflines = {}, family["scores"]["inspector"], entry, None
        cover = ((family.get("coverage_other_families") or {}).get("inspector") or {}).get("mean")
    summary = table_summary(scores)
    rel = os.path.relpath(file, ROOT)
    source = {"file": file if rel.startswith("..") else rel, "date": stamp.get("date"),
              "command": stamp.get("command"), "folds": len(family.get("folds") or []),
              "coverage": cover, "step_time_mape": summary["step_time_mape"],
              "median_mape": summary["mape_median"],
              "how": "intervals" + (" and roofline modes" if with_modes else "")
                     + " from every held-out family fold; figures cross-fitted (each fold "
                       "calibrated on the other folds)"}
    if figures:
        source["roofline_modes"] = {  # the figures the choice was made on
            "rule": roofline_modes, "judged_by": rule, "shipped": with_modes, "variants": figures["variants"],
            "median_mape_with": figures["cross_fitted"]["median_mape"],
            "median_mape_as_is": figures["as_is"]["median_mape"]}
    calibration = UnseenFamilyCalibration(modes, intervals, sorted(training_families(inspector, models_dir)),
                                          source, rooflines or {})
    inspector.info["unseen_family"] = calibration.to_dict()
    inspector.save(os.path.dirname(str(path)))
    keep = {**{k: reg_entry[k] for k in ("description", "trained", "scores", "card") if reg_entry.get(k) is not None},
            **optional_fields(reg_entry, without=("unseen",))}  # all but the checksum and unseen, renewed here
    default = load_registry(Path(models_dir)).get("default") == setting
    register(setting, path, root=models_dir, default=default, **keep,
             unseen={"folds": source["folds"], "step_time_mape": source["step_time_mape"],
                     "median_mape": source["median_mape"], "coverage": source["coverage"],
                     "roofline_modes": bool(calibration.joined)})
    figures["out_of_zoo"] = out_of_zoo_figures(calibration, inspector, os.path.dirname(file), setting)
    return {"setting": setting, "modes": calibration.modes, "families": list(calibration.families),
            **source, "figures": figures}


def ship_unseen_families(models_dir: str, evaluation: str | None = None, settings=None,
                         roofline_modes: str = "auto", roofline_sets=None, modes_rule: str = "median",
                         argv=None) -> list:
    """:func:`attach` for each of ``settings`` (default: every one the evaluation's
    ``accuracy.json`` in ``evaluation``, default ``<models_dir>/evaluation``, evaluated), then
    the figures into :data:`FIGURES` beside it; returns what was written per setting.
    ``roofline_sets``: comma-separated variant names per set."""
    from driple.errors import DripleError

    models_dir = os.path.abspath(models_dir)  # before the chdir below
    evaluation = os.path.abspath(evaluation or os.path.join(models_dir, "evaluation"))
    file = os.path.join(evaluation, "accuracy.json")
    try:
        with open(file) as f:
            accuracy = json.load(f)
    except (OSError, ValueError) as err:
        raise DripleError(f"cannot read {file}: {err}") from None
    settings = settings or sorted(accuracy.get("settings") or {})
    sets = [tuple(v.strip() for v in x.split(",") if v.strip()) for x in roofline_sets] if roofline_sets else None
    os.chdir(ROOT)  # datasets are recorded relative to the repository
    done = [attach(s, accuracy, models_dir, os.path.abspath(file), roofline_modes, sets, modes_rule) for s in settings]
    write_figures(os.path.join(evaluation, FIGURES), done, accuracy, argv)
    return done
