"""The ``accuracy`` section: every estimator fitted on the same folds per setting (random and
leave-one-family-out splits), with interval coverage; its report.
"""
from __future__ import annotations

import time

import numpy as np

from driple.evaluation.reproduce.context import Context, cpu_models_text, run_stamp, say
from driple.evaluation.reproduce.coverage import coverage_other_families, fold_coverage, held_out_intervals
from driple.evaluation.reproduce.tables import against_tables, fixed, split_tables
from driple.evaluation.reproduce.unseen import unseen_modes


PAPER_MEAN_ERROR = {"compute": 11, "memory": 9, "tx": 17, "rx": 15}  # %, Driple Table (GPU)


def section_accuracy(ctx: Context) -> None:
    from driple.inspector.evaluate import evaluate, format_report, to_json
    from driple.inspector.noise import noise_floor, retest_dir

    a = ctx.args
    source_name = ctx.source_setting()
    from driple.errors import DripleError

    previous = ((ctx.load("accuracy") or {}).get("settings") or {}) if a.merge_estimators else {}
    out = ctx.kept("accuracy", "settings")
    settings = ctx.settings()
    settings.sort(key=lambda s: s != source_name)  # the source first: its family folds are cached
    for setting in settings:
        inspector = ctx.inspector(setting)
        ds = ctx.dataset(setting, inspector.build_options())
        transfer = inspector.info.get("transfer")
        source = source_ds = None
        if transfer:
            source = ctx.inspector(transfer["from_setting"])
            if not a.no_retrain_source:
                source_ds = ctx.dataset(transfer["from_setting"], source.build_options())
        retest = retest_dir(ctx.dataset_dir(setting))
        floor = noise_floor(ctx.dataset_dir(setting), retest, ds.target_names) if retest else None
        entry = {"jobs": len(ds), "cpu_model": cpu_models_text(ds.frame), "retest": retest, **run_stamp()}
        for split in a.splits:
            t0 = time.perf_counter()
            report = evaluate(inspector, ds, split=split, baselines=estimators_for(a.estimators, ds),
                              progress=not a.quiet, families=a.families if split == "family" else None,
                              overrides=ctx.overrides(), source=source, source_dataset=source_ds,
                              retrain_source=bool(transfer) and not a.no_retrain_source,
                              floor=floor, cache=ctx.cache, retrain=True, seed=a.seed)
            entry[split] = {**to_json(report), "coverage": fold_coverage(report, a.coverage),
                            "seconds": time.perf_counter() - t0,
                            "network_predictions": network_predictions(report)}
            if split == "family":
                entry[split].update(coverage_other_families=coverage_other_families(report, a.coverage),
                                    family_intervals=held_out_intervals(report, "inspector", a.coverage),
                                    unseen_modes=unseen_modes(report, a.coverage))
            if a.merge_estimators:
                before = (previous.get(setting) or {}).get(split)
                if not before:
                    raise DripleError(f"--merge-estimators: {ctx.out}/accuracy.json has no {split} split of "
                                      f"{setting} to keep the other estimators from")
                entry[split] = merge_estimators(before, entry[split], floor)
                entry.setdefault("kept_from", {"date": previous[setting].get("date"),
                                               "command": previous[setting].get("command")})
            say(format_report(report))
            say(f"accuracy {setting} {split}: {time.perf_counter() - t0:.0f} s\n")
        out[setting] = entry
        ctx.save("accuracy", {"settings": out, "source": source_name,
                              "command_of_a_row": "driple evaluate <models>/<setting> --split <split> "
                                                  "--retrain [--retrain-source] --estimators "
                                                  + ",".join(a.estimators)})


def merge_estimators(before: dict, new: dict, floor=None) -> dict:
    """One split's accuracy entry with ``new``'s estimators (the inspector and those re-run)
    replacing ``before``'s and every other estimator of ``before`` kept: per-estimator tables
    merged, the wins and the floor check counted again over all of them, the inspector's own
    records (held-out intervals, unseen modes, network predictions) from ``new``. Refused when
    the two were not scored on the same folds and test jobs."""
    from driple.errors import DripleError
    from driple.inspector.evaluate import to_json, win_counts
    from driple.inspector.noise import floor_check

    def folds_of(entry):
        return [(f.get("held_out"), list(f.get("test_job_ids") or [])) for f in entry.get("folds") or []]

    if (folds_of(before) != folds_of(new) or before.get("targets") != new.get("targets")
            or before.get("seed", 0) != new.get("seed", 0)):
        raise DripleError("--merge-estimators: the earlier evaluation was scored on other folds or targets "
                          "(the dataset, the split or the seed changed); run every estimator again")
    rerun = list(new["estimators"])
    out = dict(before)
    out["estimators"] = [e for e in before["estimators"] if e not in rerun] + rerun
    out["estimators"] = sorted(out["estimators"], key=lambda e: (e != "inspector"))  # the inspector first
    for key in ("scores", "fold_mean", "notes", "coverage", "coverage_other_families"):
        if isinstance(new.get(key), dict) or isinstance(before.get(key), dict):
            out[key] = {**(before.get(key) or {}), **(new.get(key) or {})}
    out["folds"] = []
    for old_fold, new_fold in zip(before["folds"], new["folds"]):
        fold = {**old_fold, **{k: v for k, v in new_fold.items() if k not in ("scores", "seconds", "notes")}}
        for key in ("scores", "seconds", "notes"):
            fold[key] = {**(old_fold.get(key) or {}), **(new_fold.get(key) or {})}
        out["folds"].append(fold)
    out["wins"] = win_counts(out["scores"], out["targets"])
    if floor is not None:
        out["floor_check"] = to_json({key: floor_check(out["scores"], floor, key=key) for key in ("nrmse", "mape")})
    for key in ("network_predictions", "family_intervals", "unseen_modes", "seconds", "n_test"):
        if key in new:
            out[key] = new[key]
    out["merged"] = {"rerun": rerun, "kept": [e for e in out["estimators"] if e not in rerun]}
    return out


def estimators_for(names: list[str], ds) -> list[str]:
    """``names`` without the estimators that read the host's figures (priors, rooflines) on a
    labels v1 dataset: v1 rows mix CPU models, and carry no step time."""
    v2_only = ("analytic", "roofline", "roofline-overlap", "hgb-priors", "hybrid+hgb-priors", "hybrid", "features")
    return [n for n in names if n not in v2_only or "step_time" in ds.target_names]


def network_predictions(report: dict, name: str = "inspector") -> list | None:
    """Per fold, the inspector's network predictions before its roofline was joined (validation
    and test jobs) with the fold's job ids: what ``scripts/rejoin_roofline.py`` joins a changed
    roofline to without retraining. None when the inspector has no roofline."""
    from driple.inspector.evaluate import to_json

    folds = report["folds"]
    if not folds or any(name not in (f.get("network") or {}) for f in folds):
        return None
    return [{"held_out": f["held_out"], "test_job_ids": list(f["test_job_ids"]),
             **to_json(f["network"][name])} for f in folds]


def report_accuracy(acc) -> list[str]:
    from driple.metrics import resource_names

    lines = ["## Accuracy on held-out jobs", "",
             "Every estimator fitted on the same folds in one run (`driple evaluate`, see "
             "`scripts/reproduce.py`). Splits group jobs by architecture (model + knobs) into "
             "train / validation (early stopping, choices) / calibration (intervals only) / test. "
             "random: one seeded split, every model trained on it; family: leave one family out, "
             "every model retrained per fold (a transferred inspector's source too, unless noted). "
             "Errors pooled over the test jobs. floor: the label's noise floor from the retest "
             "(NRMSE of predicting the retest by the first measurement); vs floor: best / floor.", ""]
    summary = ["| setting | split | test jobs | " , "|---|---|---|"]
    estimators = None
    for setting, r in acc["settings"].items():
        for split in ("random", "family"):
            if split not in r:
                continue
            rep = r[split]
            estimators = estimators or rep["estimators"]
            lines += [f"### {setting}, {split} split ({rep['n_test']} test jobs"
                      + (f", CPU {r['cpu_model']}" if r.get("cpu_model") else "") + ")", ""]
            lines += split_tables(rep)
            if split == "family":
                lines += against_tables(rep)
            summary.append(f"| {setting} | {split} | {rep['n_test']} | "
                           + " | ".join(f"{fixed(rep['scores'][m]['mean']['nrmse'])} / "
                                        f"{fixed(rep['scores'][m]['mean']['mape'], True)}"
                                        for m in rep["estimators"]) + " |")
    if estimators:
        summary[0] += " | ".join(estimators) + " |"
        summary[1] += "---|" * len(estimators)
        lines += ["### Summary: mean over targets, NRMSE / MAPE", ""] + summary + [""]
        lines += ["Per resource, mean MAPE over its three metrics (inspector, family split) beside "
                  "the paper's mean error on GPU clusters:", "",
                  "| setting | " + " | ".join(resource_names()) + " |",
                  "|---|" + "---|" * len(resource_names()),
                  "| paper (GPU) | " + " | ".join(f"{PAPER_MEAN_ERROR.get(r, '-')}%" for r in resource_names()) + " |"]
        for setting, r in acc["settings"].items():
            rep = r.get("family") or r.get("random")
            s = rep["scores"]["inspector"]
            cells = []
            for res in resource_names():
                vals = [s[f"{res}_{k}"]["mape"] for k in ("burst_amount", "burst_duration", "idle_duration")
                        if s.get(f"{res}_{k}", {}).get("mape") is not None]
                cells.append(fixed(float(np.mean(vals)), True) if vals else "-")
            lines.append(f"| {setting} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines
