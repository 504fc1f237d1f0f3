"""The ``outofzoo`` section: the shipped inspector of a setting on a set of architectures written
by others, beside the baselines, with the host's drift between sessions; its report.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

from driple.evaluation.reproduce.accuracy import estimators_for
from driple.evaluation.reproduce.context import Context, ROOT, say, section_files, shown_path
from driple.evaluation.reproduce.coverage import fold_coverage
from driple.evaluation.reproduce.tables import fixed, split_tables


#: The out-of-zoo sets under ``datasets/`` evaluated by default (``--out-of-zoo`` replaces them):
#: the source setting's (the accuracy bars') and the same grid measured in the parameter-server
#: setting on the CPU model of its dataset.
DEFAULT_OUT_OF_ZOO = ("out-of-zoo", os.path.join("v2-intel", "out-of-zoo-cpu-ps-p1w2-1g"))


def out_of_zoo_sets(args) -> list[str]:
    """The out-of-zoo directories to evaluate: ``--out-of-zoo`` as given (absolute), else every
    one of :data:`DEFAULT_OUT_OF_ZOO` that holds measured jobs."""
    if args.out_of_zoo:
        return [os.path.abspath(d) for d in args.out_of_zoo]
    found = [os.path.join(ROOT, "datasets", d) for d in DEFAULT_OUT_OF_ZOO]
    return [d for d in found if os.path.exists(os.path.join(d, "results.csv"))]


def out_of_zoo_setting(root: str) -> str:
    """The one setting the jobs of an out-of-zoo set ran in (its ``setting`` column)."""
    from driple.csvtable import read_csv
    from driple.errors import DripleError

    settings = sorted(set(read_csv(os.path.join(root, "results.csv"))["setting"].dropna()))
    if len(settings) != 1:
        raise DripleError(f"an out-of-zoo set holds the jobs of one setting; {root} has "
                          f"{', '.join(settings) or 'none'}")
    return settings[0]


def outofzoo_name(ctx: Context, setting: str) -> str:
    """The JSON an out-of-zoo set's section writes: ``outofzoo`` for the source setting's set,
    ``outofzoo-<setting>`` for another setting's."""
    return "outofzoo" if setting == ctx.source_setting() else f"outofzoo-{setting}"


def section_outofzoo(ctx: Context) -> None:
    """Each out-of-zoo set (:func:`out_of_zoo_sets`): its setting's shipped inspector on it."""
    from driple.errors import DripleError

    sets = out_of_zoo_sets(ctx.args)
    if not sets:
        say("outofzoo: no measured out-of-zoo set; skipped")
    names = {}
    for root in sets:
        if not os.path.exists(os.path.join(root, "results.csv")):
            say(f"outofzoo: no measured jobs in {root}; skipped")
            continue
        setting = out_of_zoo_setting(root)
        if setting in names:
            raise DripleError(f"two out-of-zoo sets of {setting}: {names[setting]} and {root}; "
                              "give one per setting")
        names[setting] = root
        outofzoo_set(ctx, root, setting)


def outofzoo_set(ctx: Context, root: str, setting: str) -> None:
    """The shipped inspector of ``setting``, as shipped, on the out-of-zoo set at ``root``
    (architectures written by others, never trained on or chosen with), beside the baselines
    fitted on its own training jobs."""
    from driple.inspector.evaluate import evaluate, format_report, to_json

    a = ctx.args
    inspector = ctx.inspector(setting)
    ds = ctx.dataset(setting, inspector.build_options())
    external = ctx.dataset(setting, inspector.build_options(), root=root)
    t0 = time.perf_counter()
    report = evaluate(inspector, ds, baselines=estimators_for(a.estimators, ds),
                      progress=not a.quiet, overrides=ctx.overrides(), cache=ctx.cache, external=external)
    say(format_report(report))
    fold = report["folds"][0]
    held = {"measured": to_json(fold["measured"]), "predicted": to_json(fold["predictions"]["inspector"])}
    if "roofline" in fold["predictions"]:  # what the unseen-family calibration joins in
        held["roofline"] = to_json(fold["predictions"]["roofline"])
    name = outofzoo_name(ctx, setting)
    drift = session_drift(root, ctx.dataset_dir(setting))
    if drift:  # the set's host against the dataset's: the same jobs measured beside the set
        drift["scores"] = drift_corrected_scores(report, drift)
    ctx.save(name, {"setting": setting, "out_of_zoo": root, "jobs": len(external),
                    "source": name == "outofzoo", "drift": drift,
                    **to_json(report), "coverage": fold_coverage(report, a.coverage),
                    "inspector_predictions": held,
                    "seconds": time.perf_counter() - t0,
                    "command_of_a_row": f"driple evaluate <models>/{setting} --external {shown_path(root)}"})


def session_drift(root: str, dataset_dir: str) -> dict | None:
    """How much slower or faster the host of an out-of-zoo set ran than the host of its
    setting's dataset: when the set's ``provenance.json`` names a ``same_session_retest``
    (a ``<dataset>-retest-<name>`` directory beside the dataset, measured in the set's session),
    per label the median ratio of those jobs to the dataset's rows
    (:func:`driple.collect.retest.host_ratio_table`); None otherwise. The hardware is part of
    the setting, and a VM of one CPU model drifts between sessions: without this the set's
    errors would mix the inspector's with the host's."""
    from driple.collect.retest import host_ratio_table
    from driple.errors import DripleError

    try:
        with open(os.path.join(root, "provenance.json")) as f:
            name = json.load(f).get("same_session_retest")
    except (OSError, ValueError):
        return None
    if not name:
        return None
    retest = os.path.join(os.path.dirname(os.path.normpath(dataset_dir)), name)
    if not os.path.exists(os.path.join(retest, "results.csv")):
        raise DripleError(f"{root} names its same-session retest {name}, which is not beside {dataset_dir}")
    table = host_ratio_table(retest, dataset_dir)
    return {"retest": shown_path(retest), "jobs": table["jobs"],
            "ratio": {t: v["median_ratio"] for t, v in table["labels"].items()}}


def drift_corrected_scores(report: dict, drift: dict) -> dict:
    """Every estimator's scores on the external fold with each measured label divided by the
    host's drift ratio (:func:`session_drift`): the errors on the dataset's host."""
    from driple.inspector.scores import score_table

    fold = report["folds"][0]
    ratio = np.array([drift["ratio"].get(t, np.nan) for t in report["targets"]])
    measured = np.asarray(fold["measured"], dtype=float) / ratio
    return {m: score_table(measured, np.asarray(p, dtype=float), report["targets"])
            for m, p in fold["predictions"].items()}


def outofzoo_results(ctx: Context) -> list[dict]:
    """Every out-of-zoo section's results in ``ctx.out`` with scores: the source setting's set
    (``outofzoo.json``) first, then the other settings' (``outofzoo-<setting>.json``) by name."""
    names = ["outofzoo"] + [name[:-len(".json")] for name in section_files(ctx.out, "outofzoo")]
    return [r for r in map(ctx.load, names) if r and r.get("scores")]


def outofzoo_label(ooz: dict) -> str:
    """How the bars' tables name an out-of-zoo set."""
    return f"out of zoo ({ooz.get('setting', '?')} inspector)"


def report_outofzoo(ooz) -> list[str]:
    rep = {**ooz, "coverage": ooz.get("coverage")}
    return [f"## Out-of-zoo: {ooz['jobs']} jobs of architectures written by others ({ooz['setting']})", "",
            f"`{ooz['out_of_zoo']}`: never trained on, never used to choose. The inspector as "
            "shipped; the baselines fitted on its own training and validation jobs; intervals "
            "calibrated on its calibration jobs.", ""] + split_tables(rep) + drift_lines(ooz)


def drift_lines(ooz) -> list[str]:
    """The set's host against its dataset's (:func:`session_drift`) and the MAPE with the
    measured labels corrected for it."""
    drift = ooz.get("drift")
    if not drift:
        return []
    ratio, scores = drift["ratio"], drift["scores"]
    names = [m for m in ooz["estimators"] if m in scores]
    rows = [f"| {t} | {ratio[t]:.2f}x | " + " | ".join(fixed(scores[m][t]["mape"], True) for m in names) + " |"
            for t in ooz["targets"] if t in ratio]
    return [f"This set's host against the dataset's: the {drift['jobs']} jobs of `{drift['retest']}`, "
            "measured in the same session as the set, beside their rows in the dataset (median ratio "
            "per label). MAPE % with each measured label divided by that ratio (the errors on the "
            "dataset's host):", "",
            "| target | host ratio | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names), *rows, ""]
