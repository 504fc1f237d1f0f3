"""Regenerate the README's results from datasets and the shipped inspectors (their configurations).

    python scripts/reproduce.py                          # every section, then the report
    python scripts/reproduce.py --sections accuracy      # one section; sections can run in
    python scripts/reproduce.py --sections transfer      #  separate processes: each writes
    python scripts/reproduce.py --report                 #  its JSON, --report merges them
    python scripts/reproduce.py --datasets-dir /copy/of/data --work-dir /tmp/w --out /tmp/w/eval
    python scripts/reproduce.py --jobs 4                 # the same, 4 processes side by side

Sections (each writes ``<out>/<section>.json``; ``<out>`` is ``<models dir>/evaluation`` unless
``--out`` says otherwise):

- ``labels``: relabel every dataset's jobs from their raw files with both labellers
  (``driple collect relabel --labeller timeline|kmeans``): are the table's labels reproduced?
- ``retest``: per setting with a ``<setting>-retest`` dataset, both labellers: test-retest
  difference per label (the agreement rule of :mod:`driple.collect.retest`), worker agreement,
  and the noise floor (:mod:`driple.inspector.noise`); the retest jobs measured in other
  sessions (``<setting>-retest-<name>``) against the dataset (the host's drift between days);
  the same grid measured on another CPU model, label by label.
- ``accuracy``: per setting, every estimator (the shipped inspector's configuration, the
  baselines ``mean``, ``hgb``, ``knn``, the paper's ``gnn`` and any registered one) fitted on
  the same folds (:func:`driple.inspector.evaluate.evaluate` — what ``driple evaluate`` runs):
  a random split by architecture with the inspector's configuration trained on it (``driple
  evaluate --retrain``: it does not depend on the shipped weights, so it runs on datasets not
  shipped yet), and leave-one-family-out; per
  target NRMSE and MAPE beside the noise floor; interval coverage of each estimator on the
  test jobs, calibrated on the calibration jobs only. A transferred inspector's source is
  retrained per fold without what the fold holds out (``--no-retrain-source``: kept, and
  labelled "family seen in source"). On the family split also the calibration for models of
  an unseen family (:mod:`driple.predict.unseen`: roofline modes and intervals from the
  held-out jobs; ``scripts/calibrate_unseen_families.py`` ships it) and its cross-fitted check.
- ``outofzoo``: the shipped inspector of each ``--out-of-zoo`` set's setting on that set
  (default: :data:`DEFAULT_OUT_OF_ZOO`, architectures written by others, never trained on or
  chosen with: ``datasets/out-of-zoo`` in the source setting, the set the accuracy bars are about,
  and the same architectures in the parameter-server setting on its CPU model), beside the
  baselines fitted on that inspector's own training jobs (``driple evaluate --external``), with
  interval coverage; ``outofzoo.json`` for the source setting's set, ``outofzoo-<setting>.json``
  for another setting's.
- ``colocate``: every ``corun-<setting>`` dataset (``driple collect corun``) whose setting has
  an inspector: the pairs predicted with it and with the jobs' solo measurements, against what
  was measured while they ran together, and the confusion table of predicted fit ("packs well")
  against measured fit (no job slowed by more than 1.15x); ``scripts/eval_colocate.py``.
- ``transfer``: per target setting, fine-tuning (paper scheme, for a source with graph layers;
  MLP only) vs training from
  scratch at fractions of the target's training jobs; the source retrained without the
  target's test architectures (unless ``--no-retrain-source``).
- ``design``: grouping policy, repetitions K of the shared layer and target scaling on the
  source setting; chosen on validation NRMSE, test NRMSE reported beside it.

The report (``results.md`` beside the JSON files) holds the tables the README quotes.
A setting's dataset is the one ``<datasets-dir>/settings.json`` names (with the CPU model that
measured it; see :mod:`driple.setting_datasets`), else ``<datasets-dir>/<setting>``; its retest
and co-runs sit beside it. With ``--work-dir`` each ``results.csv`` is copied there first and
the graphs are built there, so the datasets directory is only read. Ctrl-C, SIGTERM or SIGHUP
stop a run (exit 130/143/129) with every child process stopped and the sections that finished
kept in ``<out>``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time

import numpy as np

from driple.zoo.workload import checkout_root

ROOT = str(checkout_root())  # the checkout this package is installed from (editable install)
SECTIONS = ("labels", "retest", "accuracy", "outofzoo", "colocate", "transfer", "design")
LABELLERS = ("timeline", "kmeans")
PAPER_MEAN_ERROR = {"compute": 11, "memory": 9, "tx": 17, "rx": 15}  # %, Driple Table (GPU)
RETEST_TOLERANCE = 0.10  # median test-retest difference a label must stay within


class Context:
    """Where things are: datasets (read), work dir (graphs), output (JSON, results.md)."""

    def __init__(self, args):
        from driple.predict.registry import models_dir

        self.args = args
        from driple.setting_datasets import SettingDatasets

        self.datasets = os.path.abspath(args.datasets_dir)
        self.index = SettingDatasets.load(self.datasets)
        self.models = os.path.abspath(args.models_dir) if args.models_dir else str(models_dir())
        self.out = os.path.abspath(args.out) if args.out else os.path.join(self.models, "evaluation")
        self.work = os.path.abspath(args.work_dir) if args.work_dir else None
        self.cache: dict = {}  # trainings shared between settings (a source's family folds)
        self.copied: set = set()  # settings copied to the work dir in this run (one snapshot each)

    def dataset_dir(self, setting: str) -> str:
        return self.index.dataset_dir(setting)

    def dataset(self, setting: str, builder: dict, root: str | None = None):
        """The inspector dataset of ``setting`` (at ``root``, default its directory under the
        datasets) built with ``builder`` options (in the work dir)."""
        from driple.inspector.dataset import InspectorDataset

        root = root or self.dataset_dir(setting)
        if not os.path.exists(os.path.join(root, "results.csv")):
            from driple.errors import DripleError

            raise DripleError(f"no dataset for {setting} at {root}")
        graph_cache = self.args.graph_cache
        if self.work:
            name = os.path.basename(os.path.normpath(root))
            copy = os.path.join(self.work, "datasets", name)
            if name not in self.copied:  # a dataset still being written: one snapshot per run
                os.makedirs(copy, exist_ok=True)
                for file in ("results.csv", "provenance.json"):
                    if os.path.exists(os.path.join(root, file)):
                        shutil.copy2(os.path.join(root, file), os.path.join(copy, file))
                self.copied.add(name)
            root = copy
            graph_cache = graph_cache or os.path.join(self.work, "datasets", ".graph-cache")
        return InspectorDataset(root, groups=builder.get("groups", 100),
                                grouping=builder.get("grouping", "uniform"),
                                features=builder.get("features", "driple"),
                                seed=builder.get("seed", 42), workers=self.args.build_workers,
                                graph_cache=graph_cache, progress=not self.args.quiet)

    def inspector(self, setting: str):
        from driple.inspector.checkpoint import load_inspector
        from driple.predict.registry import resolve

        path, _ = resolve(setting, root=self._root())
        return load_inspector(str(path))

    def settings(self) -> list[str]:
        """Settings with a shipped inspector and a dataset (``--settings`` limits them)."""
        from driple.predict.registry import list_settings

        shipped = [e["setting"] for e in list_settings(self._root())]
        chosen = self.args.settings or shipped
        measured = set(self.index.settings())
        return [s for s in chosen if s in measured
                and os.path.exists(os.path.join(self.dataset_dir(s), "results.csv"))]

    def source_setting(self) -> str:
        from driple.predict.registry import load_registry

        return load_registry(self._root()).get("default")

    def _root(self):
        from pathlib import Path

        return Path(self.models)

    def save(self, section: str, data: dict) -> None:
        os.makedirs(self.out, exist_ok=True)
        data = {"section": section, **_run_stamp(), "datasets": _shown(self.datasets), **data}
        with open(os.path.join(self.out, f"{section}.json"), "w") as f:
            json.dump(_plain(data), f, indent=2)

    def load(self, section: str):
        path = os.path.join(self.out, f"{section}.json")
        return json.load(open(path)) if os.path.exists(path) else None

    def kept(self, section: str, key: str) -> dict:
        """Entries of an earlier run of ``section`` that this run does not redo (``--settings``)."""
        if not self.args.settings:
            return {}
        return {k: v for k, v in ((self.load(section) or {}).get(key) or {}).items()
                if k not in self.args.settings}

    def overrides(self) -> dict:
        a = self.args
        return {k: v for k, v in (("epochs", a.epochs), ("patience", a.patience),
                                  ("target_scaling", a.target_scaling)) if v is not None}


def _shown(path: str) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    return os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, str) and obj.startswith(ROOT + os.sep):
        return _shown(obj)  # paths in the repository as the reports show them
    return obj


def _say(text: str) -> None:
    print(text, flush=True)


# ---------------------------------------------------------------------- sections
def section_labels(ctx: Context) -> None:
    from driple.collect.relabel import check_dataset

    out = {}
    paths = [os.path.join(c, n) for c in ctx.index.collections() for n in sorted(os.listdir(c))]
    for path in paths:
        if not os.path.exists(os.path.join(path, "results.csv")):
            continue
        name = _shown(path) if ctx.index.indexed else os.path.basename(path)
        if ctx.args.settings and os.path.basename(path) not in ctx.args.settings:
            continue
        out[name] = {}
        for labeller in LABELLERS:
            r = check_dataset(path, progress=not ctx.args.quiet, labeller=labeller)
            out[name][labeller] = {"jobs": r["jobs"], "identical": r["identical"],
                                   "mismatched": len(r["mismatched"]), "errors": len(r["errors"]),
                                   "first_error": next(iter(r["errors"].values()), None)}
            _say(f"labels {name} ({labeller}): {r['identical']} of {r['jobs']} identical, "
                 f"{len(r['errors'])} could not be relabelled")
    ctx.save("labels", {"datasets": out})


def section_retest(ctx: Context) -> None:
    from driple.collect.results import load_results
    from driple.collect.retest import retest_table, worker_table
    from driple.inspector.dataset import dataset_label_version
    from driple.inspector.noise import noise_floor, other_session_dirs, retest_dir
    from driple.metrics import METRICS

    out = ctx.kept("retest", "settings")
    for setting in ctx.index.settings():
        first = ctx.dataset_dir(setting)
        again = retest_dir(first)
        if again is None or (ctx.args.settings and setting not in ctx.args.settings):
            continue
        entry = {"retest": again}
        v1 = dataset_label_version(load_results(first)) == "v1"  # its metric columns are k-means labels
        for labeller in (("timeline",) if v1 else LABELLERS):
            columns = [*METRICS, "step_time"] if labeller == "timeline" else [f"kmeans_{m}" for m in METRICS]
            table = retest_table(first, again, labeller)
            workers = worker_table(first, labeller)
            floor = noise_floor(first, again, columns)
            entry["v1" if v1 else labeller] = {"jobs": table["jobs"], "retest": table["labels"],
                               "workers": workers["labels"], "worker_jobs": workers["jobs"],
                               "floor": floor["labels"]}
            ok = [c for c, v in table["labels"].items() if v.get("n") and v["median_diff"] <= RETEST_TOLERANCE]
            _say(f"retest {setting} ({'v1' if v1 else labeller}): {len(table['jobs'])} jobs; {len(ok)} of "
                 f"{len(table['labels'])} labels within {RETEST_TOLERANCE:.0%} median difference")
        entry["other_sessions"] = [  # the retest jobs measured on other days: the host's drift
            {"dataset": _shown(run), "when": _when_measured(run),
             **retest_table(first, run, "timeline", max_contention=10.0)} for run in other_session_dirs(first)]
        other = _same_grid_elsewhere(ctx, setting)
        if other:  # the same jobs measured on another host: how far apart two CPU models are
            from driple.collect.retest import host_ratio_table

            entry["other_host"] = {"dataset": _shown(other), "cpu_model": _cpu_models_text(load_results(other)),
                                   **host_ratio_table(first, other)}
        out[setting] = entry
    ctx.save("retest", {"settings": out, "tolerance": RETEST_TOLERANCE})


def _same_grid_elsewhere(ctx: Context, setting: str) -> str | None:
    """A dataset of ``setting`` in another collection than the indexed one (another host):
    ``<datasets-dir>/<collection>/<name>``."""
    mine = ctx.dataset_dir(setting)
    if not ctx.index.indexed:
        return None
    for collection in sorted(os.listdir(ctx.datasets)):
        path = os.path.join(ctx.datasets, collection, os.path.basename(mine))
        if os.path.abspath(path) != os.path.abspath(mine) and os.path.exists(os.path.join(path, "results.csv")):
            return path
    return None


def _pooled_coverage(names, nominal: float, runs) -> dict:
    """Coverage per target pooled over ``runs`` of ``(calibration measured, calibration
    predicted, test measured, test predicted)``: conformal intervals fitted on each run's
    calibration part, checked on its test part. A target never predicted (the analytic
    estimator's, NaN) gets None, not 0."""
    from driple.predict.intervals import ConformalIntervals

    inside, total, predicted = [], [], []
    for cal_y, cal_p, y, p in runs:
        ints = ConformalIntervals(coverage=nominal, names=names).fit(cal_y, np.clip(cal_p, 0, None))
        low, high = ints.interval(np.clip(p, 0, None))
        ok = np.isfinite(y)
        inside.append(np.where(ok, (y >= low) & (y <= high), False).sum(0))
        total.append(ok.sum(0))
        predicted.append(np.isfinite(p).any(0))
    per = np.sum(inside, 0) / np.maximum(np.sum(total, 0), 1)
    per = np.where(np.any(predicted, 0), per, np.nan)
    cov = {m: (float(v) if np.isfinite(v) else None) for m, v in zip(names, per)}
    cov["mean"] = float(np.nanmean(per)) if np.isfinite(per).any() else None
    cov["nominal"] = nominal
    return cov


def _per_estimator(report: dict, nominal: float, runs_of) -> dict:
    """:func:`_pooled_coverage` of every estimator, ``runs_of(name)`` giving its runs; an
    estimator with too few calibration jobs for a target gets its error."""
    from driple.errors import DripleError

    out = {}
    for name in report["estimators"]:
        try:
            out[name] = _pooled_coverage(report["targets"], nominal, runs_of(name))
        except DripleError as err:  # too few calibration jobs
            out[name] = {"error": str(err)}
    return out


def _coverage(report: dict, nominal: float) -> dict:
    """Per estimator: conformal intervals fitted on each fold's calibration jobs, coverage
    measured on its test jobs (pooled over folds)."""
    return _per_estimator(report, nominal, lambda name: [
        (f["calibration_measured"], f["calibration_predictions"][name], f["measured"], f["predictions"][name])
        for f in report["folds"]])


def _coverage_other_families(report: dict, nominal: float) -> dict:
    """Per estimator, on a family split: each fold's intervals calibrated on the *held-out*
    residuals of the other folds (jobs of families their models had not seen, as a user's new
    model is), coverage measured on the fold's own held-out family (pooled over folds). The
    calibration jobs of :func:`_coverage` are of seen families, so their residuals are smaller
    than an unseen family's; this is what intervals calibrated on unseen-family residuals would
    cover. Empty for fewer than 3 folds."""
    folds = report["folds"]
    if len(folds) < 3:
        return {}

    def runs(name):
        for i, fold in enumerate(folds):
            others = [f for j, f in enumerate(folds) if j != i]
            yield (np.concatenate([f["measured"] for f in others]),
                   np.concatenate([f["predictions"][name] for f in others]),
                   fold["measured"], fold["predictions"][name])

    return _per_estimator(report, nominal, lambda name: list(runs(name)))


def _held_out_intervals(report: dict, name: str, nominal: float) -> dict | None:
    """``name``'s intervals calibrated on every fold's held-out residuals (plain dict; None when
    a target has too few): what the out-of-zoo set is checked against in the report."""
    from driple.errors import DripleError
    from driple.predict.intervals import ConformalIntervals

    folds = report["folds"]
    try:
        return ConformalIntervals(coverage=nominal, names=report["targets"]).fit(
            np.concatenate([f["measured"] for f in folds]),
            np.clip(np.concatenate([f["predictions"][name] for f in folds]), 0, None)).to_dict()
    except (DripleError, KeyError, ValueError):
        return None


def _unseen_modes(report: dict, nominal: float) -> dict | None:
    """On a family split with the inspector and the roofline, an alternative to shipping the
    held-out-family intervals alone (:func:`_held_out_intervals`, what
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
    except DripleError as err:  # too few held-out jobs for a target
        return {"error": str(err)}
    # the held-out predictions themselves (folds' test jobs in order): later analyses of the
    # unseen-family case need no retraining
    return {"calibration": {"modes": shipped.modes, "intervals": shipped.intervals.to_dict()},
            "cross_fitted": check, "nested": nested, "held_out": {k: to_json(v) for k, v in everything.items()},
            **_run_stamp()}


def _network_predictions(report: dict, name: str = "inspector") -> list | None:
    """Per fold, the inspector's network predictions before its roofline was joined (validation
    and test jobs) with the fold's job ids: what ``scripts/rejoin_roofline.py`` joins a changed
    roofline to without retraining. None when the inspector has no roofline."""
    from driple.inspector.evaluate import to_json

    folds = report["folds"]
    if not folds or any(name not in (f.get("network") or {}) for f in folds):
        return None
    return [{"held_out": f["held_out"], "test_job_ids": list(f["test_job_ids"]),
             **to_json(f["network"][name])} for f in folds]


def _outofzoo_other_families(acc: dict | None, ooz: dict) -> float | None:
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


def _outofzoo_unseen_modes(acc: dict | None, ooz: dict) -> dict | None:
    """The out-of-zoo jobs as the source inspector would predict them with the roofline modes
    chosen on its held-out families (:func:`_unseen_modes`): its prediction as it is joined with
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


#: The arguments this run was given (``main``'s ``argv``, else the command line's).
_ARGV: list[str] | None = None


def _run_stamp() -> dict:
    """This run's command and date, kept in each entry of a section: with ``--settings`` the
    entries of other settings stay from earlier runs, and say which."""
    from driple.collect.provenance import script_stamp

    return script_stamp("reproduce.py", _ARGV, host=False)


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
        entry = {"jobs": len(ds), "cpu_model": _cpu_models_text(ds.frame), "retest": retest, **_run_stamp()}
        for split in a.splits:
            t0 = time.perf_counter()
            report = evaluate(inspector, ds, split=split, baselines=_estimators_for(a.estimators, ds),
                              progress=not a.quiet, families=a.families if split == "family" else None,
                              overrides=ctx.overrides(), source=source, source_dataset=source_ds,
                              retrain_source=bool(transfer) and not a.no_retrain_source,
                              floor=floor, cache=ctx.cache, retrain=True, seed=a.seed)
            entry[split] = {**to_json(report), "coverage": _coverage(report, a.coverage),
                            "seconds": time.perf_counter() - t0,
                            "network_predictions": _network_predictions(report)}
            if split == "family":
                entry[split].update(coverage_other_families=_coverage_other_families(report, a.coverage),
                                    family_intervals=_held_out_intervals(report, "inspector", a.coverage),
                                    unseen_modes=_unseen_modes(report, a.coverage))
            if a.merge_estimators:
                before = (previous.get(setting) or {}).get(split)
                if not before:
                    raise DripleError(f"--merge-estimators: {ctx.out}/accuracy.json has no {split} split of "
                                      f"{setting} to keep the other estimators from")
                entry[split] = merge_estimators(before, entry[split], floor)
                entry.setdefault("kept_from", {"date": previous[setting].get("date"),
                                               "command": previous[setting].get("command")})
            _say(format_report(report))
            _say(f"accuracy {setting} {split}: {time.perf_counter() - t0:.0f} s\n")
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


def _estimators_for(names: list[str], ds) -> list[str]:
    """``names`` without the estimators that read the host's figures (priors, rooflines) on a
    labels v1 dataset: v1 rows mix CPU models, and carry no step time."""
    v2_only = ("analytic", "roofline", "roofline-overlap", "hgb-priors", "hybrid+hgb-priors", "hybrid", "features")
    return [n for n in names if n not in v2_only or "step_time" in ds.target_names]


def _cpu_models_text(frame) -> str | None:
    from driple.setting_datasets import cpu_models

    return ", ".join(cpu_models(frame)) or None


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
        _say("outofzoo: no measured out-of-zoo set; skipped")
    names = {}
    for root in sets:
        if not os.path.exists(os.path.join(root, "results.csv")):
            _say(f"outofzoo: no measured jobs in {root}; skipped")
            continue
        setting = out_of_zoo_setting(root)
        if setting in names:
            raise DripleError(f"two out-of-zoo sets of {setting}: {names[setting]} and {root}; "
                              "give one per setting")
        names[setting] = root
        _outofzoo_set(ctx, root, setting)


def _outofzoo_set(ctx: Context, root: str, setting: str) -> None:
    """The shipped inspector of ``setting``, as shipped, on the out-of-zoo set at ``root``
    (architectures written by others, never trained on or chosen with), beside the baselines
    fitted on its own training jobs."""
    from driple.inspector.evaluate import evaluate, format_report, to_json

    a = ctx.args
    inspector = ctx.inspector(setting)
    ds = ctx.dataset(setting, inspector.build_options())
    external = ctx.dataset(setting, inspector.build_options(), root=root)
    t0 = time.perf_counter()
    report = evaluate(inspector, ds, baselines=_estimators_for(a.estimators, ds),
                      progress=not a.quiet, overrides=ctx.overrides(), cache=ctx.cache, external=external)
    _say(format_report(report))
    fold = report["folds"][0]
    held = {"measured": to_json(fold["measured"]), "predicted": to_json(fold["predictions"]["inspector"])}
    if "roofline" in fold["predictions"]:  # what the unseen-family calibration joins in
        held["roofline"] = to_json(fold["predictions"]["roofline"])
    name = outofzoo_name(ctx, setting)
    drift = session_drift(root, ctx.dataset_dir(setting))
    if drift:  # the set's host against the dataset's: the same jobs measured beside the set
        drift["scores"] = _drift_corrected_scores(report, drift)
    ctx.save(name, {"setting": setting, "out_of_zoo": root, "jobs": len(external),
                    "source": name == "outofzoo", "drift": drift,
                    **to_json(report), "coverage": _coverage(report, a.coverage),
                    "inspector_predictions": held,
                    "seconds": time.perf_counter() - t0,
                    "command_of_a_row": f"driple evaluate <models>/{setting} --external {_shown(root)}"})


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
    return {"retest": _shown(retest), "jobs": table["jobs"],
            "ratio": {t: v["median_ratio"] for t, v in table["labels"].items()}}


def _drift_corrected_scores(report: dict, drift: dict) -> dict:
    """Every estimator's scores on the external fold with each measured label divided by the
    host's drift ratio (:func:`session_drift`): the errors on the dataset's host."""
    from driple.inspector.scores import score_table

    fold = report["folds"][0]
    ratio = np.array([drift["ratio"].get(t, np.nan) for t in report["targets"]])
    measured = np.asarray(fold["measured"], dtype=float) / ratio
    return {m: score_table(measured, np.asarray(p, dtype=float), report["targets"])
            for m, p in fold["predictions"].items()}


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
        path, _ = resolve(setting, root=ctx._root())
        result = evaluate_coruns(coruns, setting=setting, solo=ctx.dataset_dir(setting),
                                 inspector=str(path))
        _say(format_result(result) + "\n")
        out[name] = {**result, **_run_stamp(), "command_of_a_row": f"python scripts/eval_colocate.py --coruns "
                                                                  f"{_shown(coruns)} --setting <models>/{setting}"}
    if not out:
        _say("colocate: no corun-<setting> dataset with an inspector; skipped")
        return
    ctx.save("colocate", {"coruns": out})


def section_transfer(ctx: Context) -> None:
    from driple.evaluation.transfer import run_study, summarize
    from driple.inspector.estimators import GNNEstimator
    from driple.inspector.evaluate import source_split_for
    from driple.inspector.splits import random_split
    from driple.inspector.train import recorded_options
    from driple.inspector.transfer import default_scheme, finetune_options

    a = ctx.args
    source_name = ctx.source_setting()
    shipped = ctx.inspector(source_name)
    options = recorded_options(shipped, ctx.overrides())
    out = ctx.kept("transfer", "targets")
    for target in [s for s in ctx.settings() if s != source_name]:
        ds = ctx.dataset(target, shipped.build_options())
        source, held = shipped, None
        if not a.no_retrain_source:
            source_ds = ctx.dataset(source_name, shipped.build_options())
            ssplit = source_split_for(random_split(ds, seed=options.seed), ds, source_ds, options.seed)
            if ssplit is not None:
                source = GNNEstimator.from_checkpoint(shipped, options=options, progress=not a.quiet,
                                                      cache=ctx.cache).fit(
                    source_ds, ssplit.train, ssplit.val).inspector_
                held = {"n_source_jobs_held_out": len(ssplit.test), "what": ssplit.held_out}
        # the paper's scheme splits the graph layers: a features-only source has none
        schemes = ["paper", "mlp", "scratch"] if default_scheme(source) == "paper" else ["mlp", "scratch"]
        rows = run_study(source, ds, a.fractions, schemes,
                         finetune_options(shipped, ctx.overrides()), progress=not a.quiet)
        out[target] = {"rows": rows, "summary": summarize(rows, a.tolerance), "tolerance": a.tolerance,
                       "source_retrained_without": held, **_run_stamp()}
        _say("\n".join(out[target]["summary"]))
        ctx.save("transfer", {"source": source_name, "targets": out})


def section_design(ctx: Context) -> None:
    from dataclasses import replace

    from driple.inspector.splits import random_split
    from driple.inspector.train import recorded_options, retrain_config, train_inspector

    a = ctx.args
    source_name = ctx.source_setting()
    shipped = ctx.inspector(source_name)
    options = recorded_options(shipped, ctx.overrides())
    config, _ = retrain_config(shipped)  # the shipped network (paper GNN, hybrid, ...), varied below
    config = replace(config, networks=1)  # the design choices are one network's (rows comparable across runs)
    builder = shipped.build_options()
    grouping, scaling = builder.get("grouping", "uniform"), options.target_scaling
    rows = (ctx.load("design") or {}).get("rows", []) if a.keep else []
    runs = [("grouping", g, config.num_repeats, scaling) for g in a.groupings]
    runs += [("K", grouping, k, scaling) for k in a.repeats if k != config.num_repeats]
    runs += [("scaling", grouping, config.num_repeats, s) for s in a.scalings if s != scaling]
    for study, grouping_, k, scaling_ in runs:
        ds = ctx.dataset(source_name, {**builder, "grouping": grouping_})
        split = random_split(ds, seed=options.seed)
        # residuals over the priors are taken in log space: another scaling predicts the targets
        residual = config.residual and scaling_ == "ln"
        run_config = replace(config, num_repeats=k, residual=residual)
        t0 = time.perf_counter()
        model = train_inspector(ds[list(split.train)], ds[list(split.val)], replace(options, target_scaling=scaling_),
                                run_config, test=ds[list(split.test)], host=shipped.host, progress=not a.quiet)
        val, test = model.info["scores"]["val"]["mean"], model.info["scores"]["test"]["mean"]
        nodes = float(np.mean([ds[i].num_nodes for i in range(len(ds))]))
        key = (study, grouping_, k, scaling_)
        rows = [r for r in rows if (r["study"], r["grouping"], r["K"], r.get("scaling")) != key]
        rows.append({"study": study, "configuration": config.kind, "residual": residual,
                     "grouping": grouping_, "K": k, "scaling": scaling_,
                     "val_nrmse": val["nrmse"], "nrmse": test["nrmse"], "mape": test["mape"],
                     "seconds": time.perf_counter() - t0, "mean_nodes": nodes,
                     "n_val": len(split.val), "n_test": len(split.test)})
        _say(f"design {study}: {config.kind}{' (residual)' if residual else ''} grouping {grouping_} K {k} "
             f"scaling {scaling_}: validation NRMSE {val['nrmse']:.3f}, test NRMSE {test['nrmse']:.3f} "
             f"MAPE {test['mape']:.0f}% ({nodes:.0f} nodes per graph, {rows[-1]['seconds']:.0f} s)")
        ctx.save("design", {"source": source_name, "rows": rows})


# ---------------------------------------------------------------------- report
def _f(v, pct=False):
    if v is None:
        return "-"
    return f"{v:.0f}%" if pct else f"{v:.3f}"


def _report_labels(labels) -> list[str]:
    lines = ["## Labels reproduced from the raw files", "",
             "| dataset | labeller | jobs | identical | not relabelled |", "|---|---|---|---|---|"]
    for name, by in labels["datasets"].items():
        for labeller, v in by.items():
            lines.append(f"| {name} | {labeller} | {v['jobs']} | {v['identical']} | {v['errors']} |")
    return lines + [""]


RETEST_HEADINGS = {"timeline": "timeline labels (v2)", "kmeans": "k-means labels (beside v2)",
                   "v1": "labels v1 (k-means over the sampled window)"}


def _report_retest(retest) -> list[str]:
    tol = retest.get("tolerance", RETEST_TOLERANCE)
    lines = ["## Test-retest and worker agreement", "",
             f"Median difference between two measurements of a job (durations judged against the "
             f"step: see `driple/collect/retest.py`), the share of jobs that agree, the two workers' "
             f"median difference, and the noise floor (NRMSE of predicting the retest by the first "
             f"measurement). ok: median difference <= {tol:.0%}.", ""]
    for setting, entry in retest["settings"].items():
        for labeller in (*LABELLERS, "v1"):
            if labeller not in entry:
                continue
            e = entry[labeller]
            lines += [f"### {setting}, {RETEST_HEADINGS[labeller]} ({len(e['jobs'])} jobs measured twice)", "",
                      "| label | retest median diff | agree | workers median diff | floor NRMSE | floor MAPE | ok |",
                      "|---|---|---|---|---|---|---|"]
            for label, v in e["retest"].items():
                if not v.get("n"):
                    continue
                w = e["workers"].get(label, {})
                fl = e["floor"].get(label, {})
                ok = "yes" if v["median_diff"] <= tol else "**no**"
                lines.append(f"| {label} | {_f(100 * v['median_diff'], True)} | "
                             f"{_f(100 * v['agree_share'], True)} | "
                             f"{_f(100 * w['median_diff'], True) if w.get('n') else '-'} | "
                             f"{_f(fl.get('nrmse'))} | {_f(fl.get('mape'), True)} | {ok} |")
            lines.append("")
    for setting, entry in retest["settings"].items():
        lines += _other_session_lines(setting, entry) + _other_host_lines(setting, entry)
    return lines


def _when_measured(dataset_dir: str) -> str:
    """The UTC span of a dataset's ok rows (``started``), e.g. ``2026-11-25 06:57-07:07 UTC``."""
    import pandas as pd

    from driple.collect.results import load_results

    table = load_results(dataset_dir)
    if "started" not in table.columns:
        return "?"
    started = pd.to_datetime(table.loc[table["status"] == "ok", "started"], utc=True, errors="coerce").dropna()
    if started.empty:
        return "?"
    first, last = started.min(), started.max()
    end = last.strftime("%H:%M") if first.date() == last.date() else last.strftime("%Y-%m-%d %H:%M")
    return f"{first.strftime('%Y-%m-%d %H:%M')}-{end} UTC"


def _other_session_lines(setting: str, entry: dict) -> list[str]:
    """The dataset against its same-session retest and against the retest jobs measured in other
    sessions (``<dataset>-retest-<name>``): median difference per label."""
    runs = [r for r in entry.get("other_sessions") or [] if r.get("labels")]
    if not runs:
        return []
    same = (entry.get("timeline") or {}).get("retest") or {}
    lines = [f"### {setting}: the retest jobs in other sessions", "",
             "Median difference between the dataset and each measurement of its retest jobs: the "
             "retest of the same session, and runs of other sessions (quiet jobs only). Columns far "
             "above the first show a host that drifted between sessions, not a label that scatters.", "",
             "| label | same session | " + " | ".join(f"`{os.path.basename(r['dataset'])}` ({r['when']}, "
                                                     f"{len(r['jobs'])} jobs)" for r in runs) + " |",
             "|---" * (len(runs) + 2) + "|"]

    def pct(v: dict) -> str:
        return _f(100 * v["median_diff"], True) if v.get("n") else "-"

    for label, v in same.items():
        if v.get("n"):
            lines.append(f"| {label} | {pct(v)} | " + " | ".join(pct(r["labels"].get(label, {})) for r in runs) + " |")
    return lines + [""]


def _other_host_lines(setting: str, entry: dict) -> list[str]:
    """The same jobs measured on another host (CPU model): median ratio per label."""
    other = entry.get("other_host")
    if not other or not other.get("labels"):
        return []
    lines = [f"### {setting}: the same jobs on another host", "",
             f"{other['jobs']} jobs measured both in the shipped dataset and in "
             f"`{other['dataset']}` ({other.get('cpu_model') or '?'}). Median ratio shipped / "
             "other, with the middle half of the jobs: the hardware is part of the setting.", "",
             "| label | median ratio | 25-75 % |", "|---|---|---|"]
    lines += [f"| {label} | {v['median_ratio']:.2f} | {v['q25']:.2f}-{v['q75']:.2f} |"
              for label, v in other["labels"].items()]
    return lines + [""]


def _split_tables(rep) -> list[str]:
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
            cells = [_f(rep["scores"][m][t][key], False) if key == "nrmse" else
                     _f(rep["scores"][m][t][key], True) for m in rep["estimators"]]
            known = {m: rep["scores"][m][t][key] for m in rep["estimators"]
                     if rep["scores"][m][t][key] is not None}
            best = min(known, key=known.get) if known else "-"
            row = f"| {t} | "
            if floor:
                fl = floor.get(t) or {}
                row += (_f(fl.get("floor")) if key == "nrmse" else _f(fl.get("floor"), True)) + " | "
            row += " | ".join(cells) + f" | {best} |"
            if floor:
                fl = floor.get(t) or {}
                row += (f" {ratio_text(fl['ratio'])}{'' if fl['within'] else ' **over 2x**'} |"
                        if fl.get("ratio") is not None else " - |")
            lines.append(row)
        mean = [rep["scores"][m]["mean"][key] for m in rep["estimators"]]
        lines.append("| mean | " + ("| " if floor else "")
                     + " | ".join(_f(v, key == "mape") for v in mean) + " | |" + (" |" if floor else ""))
        lines.append("| targets won | " + ("| " if floor else "")
                     + " | ".join(str(rep["wins"][key][m]) for m in rep["estimators"])
                     + " | |" + (" |" if floor else ""))
        lines.append("")
    cov = rep.get("coverage") or {}
    if cov:
        lines.append("Interval coverage on the test jobs (nominal "
                     f"{next((v['nominal'] for v in cov.values() if 'nominal' in v), 0.9):.0%}, "
                     "calibrated on the calibration jobs): "
                     + ", ".join(f"{m} {_f(100 * v['mean'], True)}" if v.get("mean") is not None
                                 else f"{m} -" for m, v in cov.items()))
        lines.append("")
    for m, notes in (rep.get("notes") or {}).items():
        lines.append(f"- {m}: {'; '.join(notes)}")
    if rep.get("notes"):
        lines.append("")
    return lines


def _table_models(rep) -> list[str]:
    from driple.inspector.baselines import BASELINES  # the table models a graph network must beat

    return [m for m in rep["estimators"] if m in BASELINES]


def _medians(rep) -> tuple[dict, str]:
    """Median over the targets (those the inspector and every table model score) of the MAPE of
    the inspector and of each table model, and the best table model by it."""
    scores, tables = rep["scores"], _table_models(rep)
    med = {m: float(np.median([scores[m][t]["mape"] for t in rep["targets"]
                               if scores[m][t]["mape"] is not None and scores["inspector"][t]["mape"] is not None]))
           for m in ["inspector", *tables]}
    return med, min(tables, key=med.get)


def _against_tables(rep, margin: float = 0.25) -> list[str]:
    """Per target the inspector's MAPE beside the best table model's, and the medians over the
    targets: is the inspector ``margin`` lower (the accuracy bar)?"""
    tables = _table_models(rep)
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
        lines.append(f"| {t} | {_f(mine, True)} | {best} | {_f(known[best], True)} | "
                     f"{lower:.0%}{' ✓' if lower >= margin else ''} |")
    med, best = _medians(rep)
    lower = 1 - med["inspector"] / med[best] if med[best] else float("nan")
    lines += ["", f"Median over the targets: inspector {_f(med['inspector'], True)}, best table model "
              f"({best}) {_f(med[best], True)}: the inspector is {lower:.0%} lower "
              f"({'meets' if lower >= margin else 'misses'} the {margin:.0%} bar).", ""]
    return lines


#: The accuracy bars: the inspector's median per-target MAPE this much below the best table
#: model's on held-out families; step time MAPE at most this on held-out families / out of zoo.
BAR_LOWER, BAR_STEP_FAMILY, BAR_STEP_OUTOFZOO = 0.25, 10.0, 15.0


def _other_families_coverage_of(rep: dict):
    return ((rep.get("coverage_other_families") or {}).get("inspector") or {}).get("mean")


def _pct(v) -> str:
    """A percentage with one decimal, ``-`` for none."""
    return "-" if v is None else f"{v:.1f}%"


def _standing_row(name: str, rep: dict, step_bar: float | None, other_families: bool = True) -> str:
    """One row of :func:`_report_standing` for an evaluated split (``mape`` in %; no step-time
    bar: None)."""
    s = rep["scores"]
    step = {m: s[m].get("step_time", {}).get("mape") for m in ("inspector", "roofline", "analytic", "hgb-priors")
            if m in s}
    floor = ((rep.get("floor_check") or {}).get("mape") or {})
    over = [t for t, fl in floor.items() if fl.get("ratio") is not None and not fl.get("within")]
    cov = (rep.get("coverage") or {}).get("inspector", {}).get("mean")
    cells = [name, str(rep["n_test"])]
    if _table_models(rep) and "inspector" in s:
        med, best = _medians(rep)
        lower = 1 - med["inspector"] / med[best] if med[best] else float("nan")
        cells += [_pct(med["inspector"]), f"{_pct(med[best])} ({best})", f"{lower:.0%}"]
    else:
        cells += ["-", "-", "-"]
    mine = step.get("inspector")
    if mine is None or step_bar is None:
        cells.append(_pct(mine))
    else:
        cells.append(f"{_pct(mine)}{' ✓' if mine <= step_bar else ''} (bar {step_bar:.0f}%)")
    cells += [_pct(step.get(m)) for m in ("roofline", "analytic", "hgb-priors")]
    fl = (floor.get("step_time") or {}).get("floor")
    cells.append(_pct(fl))
    cells.append(_pct(None if cov is None else 100 * cov))
    if other_families:
        other = _other_families_coverage_of(rep)
        cells.append(_pct(None if other is None else 100 * other))
    cells.append(", ".join(over) if over else ("none" if floor else "-"))
    return "| " + " | ".join(cells) + " |"


def _report_standing(acc: dict | None, oozs: list) -> list[str]:
    """The accuracy bars in one table: held-out families per setting and the out-of-zoo sets (the
    step-time bar on the source setting's)."""
    sets = [(f"{setting}, held-out families", r["family"], BAR_STEP_FAMILY)
            for setting, r in ((acc or {}).get("settings") or {}).items() if r.get("family")]
    for ooz in oozs:
        other = _outofzoo_other_families(acc, ooz)
        if other is not None:
            ooz = {**ooz, "coverage_other_families": {"inspector": {"mean": other}}}
        bar = BAR_STEP_OUTOFZOO if ooz.get("source", True) else None
        sets.append((_outofzoo_label(ooz), ooz, bar))
        if ooz.get("drift"):  # the same set on its dataset's host (:func:`session_drift`)
            sets.append((_outofzoo_label(ooz) + ", host drift corrected",
                         {**ooz, "scores": ooz["drift"]["scores"], "coverage": None,
                          "coverage_other_families": None}, bar))
    if not sets:
        return []
    other = any(_other_families_coverage_of(rep) is not None for _, rep, _ in sets)  # runs before s29: none
    rows = [_standing_row(name, rep, bar, other) for name, rep, bar in sets]
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


def _shipped_unseen_modes(ctx: "Context", settings) -> dict:
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


def _report_unseen(acc: dict | None, oozs: list, level: str = "##", shipped: dict | None = None,
                   figures: dict | None = None) -> list[str]:
    """What the shipped inspector does for a model of a family it did not train on (a user's
    model): its seen-family intervals against intervals calibrated on held-out families (what
    it ships), and the alternative of also joining the roofline as chosen on held-out families
    (:func:`_unseen_modes`), each measured cross-fitted on the held-out families; the out-of-zoo
    sets (``oozs``) with their setting's calibration from all its folds. ``level``: the heading's
    markdown level (``###`` in a model card). ``shipped``: per setting, whether its checkpoint
    joins the modes (:func:`_shipped_unseen_modes`); a setting not in it, as the rule of
    ``calibrate_unseen_families.py --roofline-modes auto`` decides."""
    from driple.inspector.scores import table_summary
    from driple.predict.unseen import modes_ship

    def median(table) -> float | None:
        return table_summary(table)["mape_median"] if table else None

    def row(name, rep, other, modes_check, shipped):
        mine = rep["scores"]["inspector"]
        modes_scores = (modes_check or {}).get("scores") or {}
        return [name, str(rep["n_test"]), _pct(mine["step_time"]["mape"]), _pct(median(mine)),
                _pct(100 * rep["coverage"]["inspector"]["mean"]), _pct(None if other is None else 100 * other),
                _pct((modes_scores.get("step_time") or {}).get("mape")), _pct(median(modes_scores)),
                _pct(None if not modes_check else 100 * modes_check["coverage"]["mean"]),
                "modes and intervals" if shipped else "intervals"]

    rows, modes, nested, ships = [], [], [], {}
    for setting, r in ((acc or {}).get("settings") or {}).items():
        rep = r.get("family") or {}
        if not rep.get("family_intervals"):
            continue
        unseen = rep.get("unseen_modes") or {}
        ships[setting] = (shipped or {}).get(setting, modes_ship(rep))
        rows.append(row(f"{setting}, held-out families", rep, _other_families_coverage_of(rep),
                        unseen.get("cross_fitted"), ships[setting]))
        if "calibration" in unseen:
            joins = ", ".join(f"{t} {m}" for t, m in unseen["calibration"]["modes"].items() if m != "inspector")
            verb = "joins" if ships[setting] else "would join"
            modes.append(f"- {setting} ({'modes shipped' if ships[setting] else 'no modes shipped'}: cross-fitted median "
                         f"MAPE {_pct(median(unseen['cross_fitted']['scores']))} with them, "
                         f"{_pct(median(rep['scores']['inspector']))} as is): the roofline {verb} "
                         f"{joins or 'nothing'}")
        if unseen.get("nested"):
            n = unseen["nested"]
            nested.append(f"- {setting}: modes taken for {n['chosen'].count('modes')} of {len(n['chosen'])} "
                          f"families; step time {_pct(n['scores']['step_time']['mape'])}, median MAPE "
                          f"{_pct(median(n['scores']))}")
    if not rows:
        return []
    for ooz in oozs:
        rows.append(row(_outofzoo_label(ooz), ooz, _outofzoo_other_families(acc, ooz),
                        _outofzoo_unseen_modes(acc, ooz), ships.get(ooz.get("setting"), False)))
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
            *_report_unseen_shipped(figures, list(ships))]


def _report_unseen_shipped(figures: dict | None, settings: list) -> list[str]:
    """What ``calibrate_unseen_families.py`` shipped (``unseen_families.json``): per setting the
    roofline sets offered with their cross-fitted figures, the one shipped, the nested estimate
    of the whole rule and the out-of-zoo sets (never used to choose)."""
    rows = []
    for setting in settings:
        f = ((figures or {}).get("settings") or {}).get(setting)
        if not f or not f.get("roofline_sets"):
            continue
        sets = f["roofline_sets"]
        shown = lambda n: (f"{_pct(sets[n]['step_time_mape'])} / {_pct(sets[n]['median_mape'])}" if n in sets else "-")
        four = next((n for n in sets if n != "all"), None)
        joined = {m.partition(":")[2] or "own" for m in f["modes"].values() if m != "inspector"}
        shipped = ("none" if not joined else "all (evaluation's)" if joined == {"all"} else ", ".join(sorted(joined)))
        n, ooz = f.get("nested") or {}, (f.get("out_of_zoo") or [{}])[0]
        cross = f["cross_fitted"] if joined else f["as_is"]
        rows.append([setting, shown("all"), shown(four) if four else "-", shipped,
                     _pct(cross["step_time_mape"]), _pct(cross["median_mape"]),
                     _pct(n.get("step_time_mape")), _pct(n.get("median_mape")),
                     _pct(ooz.get("step_time_mape")), _pct(ooz.get("median_mape")),
                     _pct(None if ooz.get("coverage") is None else 100 * ooz["coverage"])])
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


def _report_accuracy(acc) -> list[str]:
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
            lines += _split_tables(rep)
            if split == "family":
                lines += _against_tables(rep)
            summary.append(f"| {setting} | {split} | {rep['n_test']} | "
                           + " | ".join(f"{_f(rep['scores'][m]['mean']['nrmse'])} / "
                                        f"{_f(rep['scores'][m]['mean']['mape'], True)}"
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
                cells.append(_f(float(np.mean(vals)), True) if vals else "-")
            lines.append(f"| {setting} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def outofzoo_results(ctx: Context) -> list[dict]:
    """Every out-of-zoo section's results in ``ctx.out`` with scores: the source setting's set
    (``outofzoo.json``) first, then the other settings' (``outofzoo-<setting>.json``) by name."""
    names = ["outofzoo"] + [name[:-len(".json")] for name in _section_files(ctx.out, "outofzoo")]
    return [r for r in map(ctx.load, names) if r and r.get("scores")]


def _outofzoo_label(ooz: dict) -> str:
    """How the bars' tables name an out-of-zoo set."""
    return f"out of zoo ({ooz.get('setting', '?')} inspector)"


def _report_outofzoo(ooz) -> list[str]:
    rep = {**ooz, "coverage": ooz.get("coverage")}
    return [f"## Out-of-zoo: {ooz['jobs']} jobs of architectures written by others ({ooz['setting']})", "",
            f"`{ooz['out_of_zoo']}`: never trained on, never used to choose. The inspector as "
            "shipped; the baselines fitted on its own training and validation jobs; intervals "
            "calibrated on its calibration jobs.", ""] + _split_tables(rep) + _drift_lines(ooz)


def _drift_lines(ooz) -> list[str]:
    """The set's host against its dataset's (:func:`session_drift`) and the MAPE with the
    measured labels corrected for it."""
    drift = ooz.get("drift")
    if not drift:
        return []
    ratio, scores = drift["ratio"], drift["scores"]
    names = [m for m in ooz["estimators"] if m in scores]
    rows = [f"| {t} | {ratio[t]:.2f}x | " + " | ".join(_f(scores[m][t]["mape"], True) for m in names) + " |"
            for t in ooz["targets"] if t in ratio]
    return [f"This set's host against the dataset's: the {drift['jobs']} jobs of `{drift['retest']}`, "
            "measured in the same session as the set, beside their rows in the dataset (median ratio "
            "per label). MAPE % with each measured label divided by that ratio (the errors on the "
            "dataset's host):", "",
            "| target | host ratio | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names), *rows, ""]


def _report_colocate(co) -> list[str]:
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
    return lines + _colocate_overall(co)


def _colocate_overall(co) -> list[str]:
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


def _report_transfer(tr) -> list[str]:
    lines = [f"## Transfer learning from {tr['source']}", ""]
    for target, r in tr["targets"].items():
        held = r.get("source_retrained_without")
        lines += [f"### {target}", "",
                  (f"Source retrained without {held['what']} ({held['n_source_jobs_held_out']} source "
                   "jobs held out)." if held else "Source as shipped: it may have seen the target's "
                   "test architectures in its own setting."), "",
                  "| fraction | scheme | train jobs | NRMSE | MAPE | seconds |", "|---|---|---|---|---|---|"]
        lines += [f"| {x['fraction']:.0%} | {x['scheme']} | {x['n_train']} | {_f(x['nrmse'])} | "
                  f"{_f(x['mape'], True)} | {x['seconds']:.1f} |" for x in r["rows"]]
        lines += [""] + [f"- {s}" for s in r["summary"]] + [""]
    return lines + _transfer_overview(tr)


def _transfer_overview(tr) -> list[str]:
    """One table for every target: test NRMSE (and training seconds) of each scheme at each
    fraction of the target's training jobs; the scheme's best NRMSE per row in bold."""
    schemes = list(dict.fromkeys(x["scheme"] for r in tr["targets"].values() for x in r["rows"]))
    if not schemes:
        return []
    lines = ["### Transfer overview: test NRMSE (training seconds) by fraction of the target's jobs", "",
             "| target | fraction | train jobs | " + " | ".join(schemes) + " |",
             "|---|---|---|" + "---|" * len(schemes)]
    for target, r in tr["targets"].items():
        by = {}
        for x in r["rows"]:
            by.setdefault((x["fraction"], x["n_train"]), {})[x["scheme"]] = x
        for (fraction, n), row in sorted(by.items()):
            best = min((x["nrmse"] for x in row.values() if x["nrmse"] is not None), default=None)
            cells = []
            for sc in schemes:
                x = row.get(sc)
                if x is None or x["nrmse"] is None:
                    cells.append("-")
                    continue
                text = f"{_f(x['nrmse'])} ({x['seconds']:.1f} s)"
                cells.append(f"**{text}**" if x["nrmse"] == best else text)
            lines.append(f"| {target} | {fraction:.0%} | {n} | " + " | ".join(cells) + " |")
    return lines + [""]


def _report_design(design) -> list[str]:
    rows = design["rows"]
    best = min((r for r in rows if r.get("val_nrmse") is not None), key=lambda r: r["val_nrmse"], default=None)
    lines = [f"## Design study on {design['source']} (random split by architecture)", "",
             "Chosen on validation NRMSE; the test NRMSE is reported, not used to choose.", "",
             "| study | network | grouping | K | target scaling | nodes per graph | validation NRMSE "
             "| test NRMSE | test MAPE | train s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = " **(chosen)**" if r is best else ""
        network = r.get("configuration", "gnn") + (" (residual)" if r.get("residual") else "")
        lines.append(f"| {r['study']}{mark} | {network} | {r['grouping']} | {r['K']} | {r.get('scaling', '-')} | "
                     f"{r['mean_nodes']:.0f} | "
                     f"{_f(r.get('val_nrmse'))} | {_f(r['nrmse'])} | {_f(r['mape'], True)} | {r['seconds']:.0f} |")
    return lines + [""]


CARD_HEADING = "## Against the baselines (scripts/reproduce.py)"


def _configuration_lines(lofo: dict | None, setting: str) -> list[str]:
    """The inner leave-family-out that chose the source's configuration
    (``scripts/choose_configuration_lofo.py --save``), for that setting's card."""
    if not lofo or lofo.get("setting") != setting:
        return []
    candidates = [c for c in lofo if isinstance(lofo[c], dict) and "median" in lofo[c]]
    lines = ["### Configuration chosen for unseen families", "",
             f"`{lofo.get('command', 'python scripts/choose_configuration_lofo.py')}` "
             f"({lofo.get('date', '?')}, {lofo.get('cpu_model') or '?'}): each of the "
             f"{len(lofo.get('families', []))} families of the {lofo.get('jobs', '?')} train + "
             "validation jobs predicted by each candidate (with the roofline) trained on the "
             "others; no calibration or test job. The lowest median wins."
             + (f" ({lofo['note']}.)" if lofo.get("note") else ""), "",
             "| candidate | median MAPE | mean MAPE | step time MAPE |", "|---|---|---|---|"]
    for c in candidates:
        r = lofo[c]
        mark = "**" if c == lofo.get("chosen") else ""
        lines.append(f"| {mark}{c}{mark} | {r['median']:.1f}% | {r['mean']:.1f}% | {r['step_time']:.1f}% |")
    return lines + [""]


def write_cards(ctx: Context) -> list[str]:
    """Put each setting's accuracy tables (every estimator per target, the noise floor, interval
    coverage; random and family split) into its shipped model card, replacing an earlier copy
    of that section. Returns the cards written."""
    acc = ctx.load("accuracy")
    written = []
    for setting, r in ((acc or {}).get("settings") or {}).items():
        path = os.path.join(ctx.models, setting, "MODEL_CARD.md")
        if not os.path.exists(path):
            continue
        lines = [CARD_HEADING, "",
                 f"Generated by `{r.get('command') or acc.get('command', 'python scripts/reproduce.py')}` "
                 f"({r.get('date') or acc.get('date', '?')}):"
                 " every estimator fitted on the same folds of this setting's dataset, the "
                 "inspector's configuration retrained per fold.", ""]
        for split in ("random", "family"):
            if split in r:
                lines += [f"### {split} split ({r[split]['n_test']} test jobs)", ""] + _split_tables(r[split])
                if split == "family":
                    lines += _against_tables(r[split])
        lines += _report_unseen({"settings": {setting: r}}, [], level="###",  # as in results.md
                                shipped=_shipped_unseen_modes(ctx, [setting]), figures=ctx.load("unseen_families"))
        lines += _configuration_lines(ctx.load("configuration_lofo"), setting)
        with open(path) as f:
            card = f.read()
        start = card.find(CARD_HEADING)
        if start >= 0:  # replace the earlier copy, up to the next top-level section
            nxt = card.find("\n## ", start + len(CARD_HEADING))
            card = card[:start] + (card[nxt + 1:] if nxt >= 0 else "")
        anchor = card.find("## Reproduce")
        body = "\n".join(lines).rstrip() + "\n\n"
        card = card[:anchor] + body + card[anchor:] if anchor >= 0 else card.rstrip() + "\n\n" + body
        with open(path, "w") as f:
            f.write(card)
        written.append(path)
    return written


def report(ctx: Context) -> str:
    lines = ["# Reproduced results", "",
             f"Generated by `python scripts/reproduce.py` from the datasets in `{_shown(ctx.datasets)}` and "
             "the configurations of the shipped inspectors (CPU-host labels: compute = CPU, memory = "
             "allocated bytes / RSS; no GPU figures).", ""]
    formats = (("labels", _report_labels), ("retest", _report_retest), ("accuracy", _report_accuracy),
               ("outofzoo", lambda sets: [line for ooz in sets for line in _report_outofzoo(ooz)]),
               ("colocate", _report_colocate), ("transfer", _report_transfer), ("design", _report_design))
    data = {section: outofzoo_results(ctx) if section == "outofzoo" else ctx.load(section)
            for section, _ in formats}  # each JSON read once (accuracy.json is megabytes)
    for section, fmt in formats:
        if data[section]:
            lines += fmt(data[section])
    lines += _report_standing(data["accuracy"], data["outofzoo"])
    settings = list(((data["accuracy"] or {}).get("settings") or {}))
    lines += _report_unseen(data["accuracy"], data["outofzoo"], shipped=_shipped_unseen_modes(ctx, settings),
                            figures=ctx.load("unseen_families"))
    return "\n".join(lines)


# ---------------------------------------------------------------------- README blocks (--readme)
README_BLOCK = re.compile(r"(<!-- reproduce (section|mape): (.+?) -->\n)(.*?)(<!-- /reproduce -->)", re.S)


def results_section(text: str, heading: str) -> str:
    """The body of the first ``### heading...`` (else ``## heading...``) of ``text`` up to the
    next heading of the same or a higher level; a :class:`DripleError` when there is none."""
    from driple.errors import DripleError

    lines = text.splitlines()
    for level in ("### ", "## "):
        for i, line in enumerate(lines):
            if line.startswith(level + heading):
                body = []
                for nxt in lines[i + 1:]:
                    if nxt.startswith("## ") or (level == "### " and nxt.startswith("### ")):
                        break
                    body.append(nxt)
                return "\n".join(body).strip()
    raise DripleError(f"results.md has no section {heading!r}")


def mape_part(body: str) -> str:
    """From a split's tables: the MAPE table, the coverage line and the median-over-targets line."""
    start = body.find("MAPE %:")
    if start < 0:
        return body
    part = body[start:]
    keep = part[:part.index("Inspector against")] if "Inspector against" in part else part
    median = [line for line in part.splitlines() if line.startswith("Median over the targets")]
    return keep.strip() + ("\n\n" + median[0] if median and median[0] not in keep else "")


def refresh_readme(path: str, results_md: str) -> int:
    """Replace each block ``<!-- reproduce section: HEADING -->...<!-- /reproduce -->`` of the
    file at ``path`` with that section of ``results_md`` (``mape:``: its MAPE part); the prose
    around the blocks is left alone. Returns the number of blocks refreshed."""
    from driple.errors import DripleError

    try:
        with open(path) as f:
            text = f.read()
    except OSError as err:
        raise DripleError(f"cannot read {path}: {err.strerror}") from None
    count = 0

    def fill(m):
        nonlocal count
        body = results_section(results_md, m.group(3))
        count += 1
        return m.group(1) + (mape_part(body) if m.group(2) == "mape" else body) + "\n" + m.group(5)

    new = README_BLOCK.sub(fill, text)
    if new != text:
        with open(path, "w") as f:
            f.write(new)
    return count


# ---------------------------------------------------------------------- side by side (--jobs)
def run_side_by_side(ctx: Context, sections: list[str]) -> None:
    """The sections as ``--jobs`` processes side by side: the accuracy of each setting in a
    process of its own, the other sections in one more; each child has its own work and output
    directories, reads one graph cache built here first, and its JSON is merged into
    ``ctx.out`` (accuracy by setting). Every JSON's ``command`` is this run's."""
    import multiprocessing as mp
    import tempfile

    a = ctx.args
    if ctx.work:
        os.makedirs(ctx.work, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="reproduce-", dir=ctx.work)
    # without a work directory the children read the datasets in place, and their graphs from
    # each dataset's own cache (as a run without --jobs does: nothing rebuilt that is cached)
    graph_cache = a.graph_cache or (os.path.join(ctx.work, "graph-cache") if ctx.work else None)
    _say(f"side by side ({a.jobs} processes); building every missing graph first into "
         f"{graph_cache or 'the graph cache beside each dataset'}")
    a.graph_cache = graph_cache
    settings = ctx.settings()
    for setting in settings:  # one builder, so that no two processes write one cache entry
        ctx.dataset(setting, ctx.inspector(setting).build_options())
    if "outofzoo" in sections:
        for root in out_of_zoo_sets(a):
            if os.path.exists(os.path.join(root, "results.csv")):
                setting = out_of_zoo_setting(root)
                ctx.dataset(setting, ctx.inspector(setting).build_options(), root=root)

    children = []
    if "accuracy" in sections:
        children += [(["accuracy"], [s]) for s in settings]
    rest = [s for s in sections if s != "accuracy"]
    if rest:
        children.append((rest, a.settings))
    jobs = []
    for i, (secs, only) in enumerate(children):
        out = os.path.join(scratch, f"out{i}")
        os.makedirs(out)
        for name in os.listdir(ctx.out) if os.path.isdir(ctx.out) else []:
            if name.endswith(".json"):  # earlier entries that --settings keeps
                shutil.copy2(os.path.join(ctx.out, name), out)
        child = {**vars(a), "sections": ",".join(secs), "settings": only, "out": out,
                 "work_dir": os.path.join(scratch, f"work{i}") if ctx.work else None, "jobs": 1,
                 "datasets_dir": ctx.datasets, "models_dir": ctx.models}
        jobs.append(child)
    # fork: the children start from this process (its imports, its label version); the graphs
    # they read are already built
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    finished = [(j["out"], secs, only) for j, (secs, only) in zip(jobs, children)]
    pool = mp.get_context(method).Pool(min(a.jobs, len(jobs)))
    try:
        failures = [f for f in pool.map_async(_child, jobs).get() if f]
        pool.close()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP (main turns them into this)
        pool.terminate()  # every child stopped where it is, none left running
        raise
    finally:
        pool.join()
        _merge(ctx, finished)  # each child's JSON holds only finished sections (and settings)
        shutil.rmtree(scratch, ignore_errors=True)
    if failures:
        from driple.errors import DripleError

        raise DripleError("; ".join(failures) + f" (the sections that finished are in {ctx.out})")


def _child(options: dict) -> str | None:
    """Run some sections in a child process; an error message, or None."""
    args = argparse.Namespace(**options)
    import torch

    from driple.errors import DripleError

    torch.set_num_threads(args.threads)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)
    try:
        _run_sections(Context(args), args.sections.split(","))
    except DripleError as err:
        return f"{args.sections} {args.settings or ''}: {err}"
    return None


def _run_sections(ctx: Context, sections: list[str]) -> None:
    for section in sections:
        globals()[f"section_{section}"](ctx)


def _section_files(out: str, section: str) -> list[str]:
    """A section's JSON files per setting in ``out`` (``<section>-<setting>.json``), by name."""
    import glob

    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(out), f"{section}-*.json")))


def _merge(ctx: Context, children: list[tuple[str, list[str], list[str] | None]]) -> None:
    """Children's JSON into ``ctx.out``. ``children``: (output directory, the sections it ran,
    the settings it ran them for; None: all). Each child starts from a copy of the earlier
    JSON (what ``--settings`` keeps), so only what a child ran is taken from it: accuracy by
    setting (the source first, over the kept entries), every other section's file from the
    child that ran it."""
    os.makedirs(ctx.out, exist_ok=True)
    merged, first = ctx.kept("accuracy", "settings"), None
    for out, sections, only in children:
        for section in sections:
            path = os.path.join(out, f"{section}.json")
            if not os.path.exists(path):
                continue
            if section == "accuracy":
                data = json.load(open(path))
                first = first or data
                merged.update({s: e for s, e in (data.get("settings") or {}).items()
                               if only is None or s in only})
            else:  # with the section's files per setting (outofzoo-<setting>.json)
                for name in [f"{section}.json", *_section_files(out, section)]:
                    shutil.copy2(os.path.join(out, name), os.path.join(ctx.out, name))
    if first is not None:
        source = first.get("source")
        order = sorted(merged, key=lambda s: s != source)
        ctx.save("accuracy", {"settings": {s: merged[s] for s in order}, "source": source,
                              "command_of_a_row": first.get("command_of_a_row")})


def main(argv=None) -> int:
    global _ARGV
    _ARGV = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated among {', '.join(SECTIONS)} (default all)")
    p.add_argument("--report", action="store_true", help="only merge the section JSON into results.md")
    p.add_argument("--cards", action="store_true",
                   help="also write each setting's accuracy tables (every estimator per target, both "
                   "splits) into its shipped model card")
    p.add_argument("--readme", metavar="FILE",
                   help="also refresh the results blocks of FILE (e.g. README.md): each "
                   "'<!-- reproduce section: HEADING -->' ... '<!-- /reproduce -->' gets that "
                   "section of results.md ('mape:' its MAPE part); the prose around them is left alone")
    p.add_argument("--datasets-dir", "--datasets", dest="datasets_dir", default=os.path.join(ROOT, "datasets"),
                   help="datasets directory: its settings.json names each setting's dataset (else "
                   "<setting>/ and <setting>-retest/ in it); default: the shipped datasets/")
    p.add_argument("--models-dir", default=None,
                   help="registry of the inspectors whose configurations are evaluated (default: the shipped one)")
    p.add_argument("--out", default=None, help="where the JSON and results.md go (default <models dir>/evaluation)")
    p.add_argument("--work-dir", default=None,
                   help="copy each dataset's results.csv here and build its graphs here (the datasets "
                   "directory is then only read)")
    p.add_argument("--graph-cache", default=None, help="graph cache directory (default: beside the datasets)")
    p.add_argument("--settings", nargs="*", default=None, help="limit the sections to these settings")
    p.add_argument("--out-of-zoo", action="append", default=None, metavar="DIR",
                   help="outofzoo: a held-out set of architectures written by others, scored with the "
                   "shipped inspector of the setting its jobs ran in (repeatable, one set per setting; "
                   "default: " + ", ".join(f"datasets/{d}" for d in DEFAULT_OUT_OF_ZOO) + ", those measured)")
    p.add_argument("--splits", nargs="+", default=["random", "family"], choices=["random", "family"])
    p.add_argument("--merge-estimators", action="store_true",
                   help="accuracy: keep the estimators of the earlier accuracy.json in --out that this run "
                   "does not re-run (the inspector and --estimators are re-run; same folds required): "
                   "after an inspector change, --estimators roofline --merge-estimators refreshes it and its "
                   "roofline without training the other networks again")
    p.add_argument("--families", nargs="*", default=None,
                   help="accuracy: hold out only these families in the family split (smoke runs)")
    p.add_argument("--estimators", default="mean,hgb,hgb-priors,knn,analytic,roofline,roofline-overlap,gnn,features,hybrid,hybrid+hgb-priors",
                   help="accuracy: estimators beside the inspector (default: the full ablation, "
                   "mean,hgb,hgb-priors,knn,analytic,roofline,roofline-overlap,gnn,features,hybrid,hybrid+hgb-priors; any "
                   "registered one can be named; analytic scores step time only, roofline the durations "
                   "and step time, on labels v2; a column that is the "
                   "inspector's own configuration reuses its training)")
    p.add_argument("--no-retrain-source", action="store_true",
                   help="accuracy/transfer: keep the shipped source instead of retraining it without "
                   "what a fold holds out (results labelled 'seen in source')")
    p.add_argument("--seed", type=int, default=None,
                   help="accuracy: the seed of every split and (re)training (default: the shipped "
                   "inspector's, 0). Another seed, with --out elsewhere, measures how far a retraining "
                   "alone moves the figures (a family split's held-out jobs stay the same)")
    p.add_argument("--coverage", type=float, default=0.9, help="nominal interval coverage (default 0.9)")
    p.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--groupings", nargs="+", default=["uniform", "proportional"],
                   help="grouping policies of the design study (default uniform proportional; "
                   "'none' keeps every op as a node: ~6-30x the training cost)")
    p.add_argument("--repeats", type=int, nargs="+", default=[5, 10, 20])
    p.add_argument("--scalings", nargs="+", default=["max", "log", "ln"], choices=["max", "standard", "log", "ln"],
                   help="design: target scalings compared on validation (default max log ln; the "
                   "shipped one is the base row; residuals over priors need ln, other scalings "
                   "predict the targets themselves)")
    p.add_argument("--keep", action="store_true",
                   help="design: keep the rows of an earlier run that this run does not redo")
    p.add_argument("--epochs", type=int, default=None,
                   help="epoch bound of every (re)training (default: the shipped inspector's)")
    p.add_argument("--patience", type=int, default=None, help="early-stopping patience of (re)trainings")
    p.add_argument("--target-scaling", default=None, choices=["max", "standard", "log"],
                   help="target scaling of (re)trainings (default: the shipped inspector's)")
    p.add_argument("--build-workers", type=int, default=1, help="processes building missing graphs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run the sections as N processes side by side (the accuracy of each setting "
                   "in its own, the other sections in one more; graphs built first, JSON merged): "
                   "the whole reproduction in one command on N cores")
    p.add_argument("--labels", default=None, choices=["v1", "v2"],
                   help="read the datasets as this label version (default: the declared one, "
                   "driple.metrics.DECLARED_LABELS; datasets/v2 needs v2)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.estimators = [e.strip() for e in args.estimators.split(",") if e.strip()]

    import torch

    from driple.errors import DripleError

    torch.set_num_threads(args.threads)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)
    try:
        ctx = Context(args)
    except DripleError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    from driple import interrupts
    from driple.collect.interrupts import signals_as_interrupt

    interrupts.reset()
    try:
        with signals_as_interrupt():  # SIGTERM/SIGHUP stop it as Ctrl-C does (children too)
            _run(ctx, args)
    except DripleError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"reproduce: interrupted; finished sections are in {ctx.out}", file=sys.stderr)
        return interrupts.exit_status()
    return 0


def _run(ctx: Context, args) -> None:
    """The run :func:`main` was asked for: sections (unless ``--report``), then results.md, the
    cards and the README."""
    from driple.errors import DripleError

    if not args.report:
        from driple.inspector.estimator_registry import make_estimator

        for name in args.estimators:
            make_estimator(name)  # unknown names fail before any work
        sections = [s.strip() for s in args.sections.split(",") if s.strip()]
        for section in sections:
            if section not in SECTIONS:
                raise DripleError(f"unknown section {section!r}; choose among {', '.join(SECTIONS)}")
        if args.jobs > 1:
            run_side_by_side(ctx, sections)
        else:
            _run_sections(ctx, sections)
    text = report(ctx)
    os.makedirs(ctx.out, exist_ok=True)
    with open(os.path.join(ctx.out, "results.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    if args.cards:
        for path in write_cards(ctx):
            _say(f"model card updated: {path}")
    if args.readme:
        _say(f"{args.readme}: {refresh_readme(args.readme, text)} results blocks refreshed")


if __name__ == "__main__":
    sys.exit(main())
