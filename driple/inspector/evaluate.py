"""The evaluation harness: every estimator fitted on the same folds in one run, scored on test jobs.

:func:`run_folds` is the harness. For every fold (a :class:`~driple.inspector.splits.Split`)
and every estimator (a factory ``fold -> Estimator``, see :mod:`driple.inspector.estimators`)
it fits on the fold's train jobs (choices on its val jobs), predicts its test jobs (and its
calibration jobs, for intervals) and scores the test predictions per target:

- ``scores``: NRMSE and MAPE per target (:func:`~driple.inspector.scores.score_table`) over
  the test jobs of all folds pooled (each job counted once);
- ``fold_mean``: the mean over folds of each fold's table; ``folds[i]["scores"]`` per fold;
- ``wins``: per estimator, the number of targets on which it has the lowest error (ties count
  for each);
- with a noise floor (:func:`driple.inspector.noise.noise_floor`), ``floor_check``: per target
  the floor, the best estimator, and whether it is within 2x the floor.

:func:`evaluate` evaluates a trained inspector (a checkpoint) that way, beside baselines:

- ``random``: the inspector as trained, on its own untouched test jobs (the split recorded in
  the checkpoint, when it is a four-part architecture-grouped split and the dataset holds its
  test jobs; else a seeded random split whose test part leaves out every job and architecture
  the inspector was trained or validated on); with ``retrain``, its configuration trained
  again on a fresh seeded random split, as for a family fold;
- ``family``: leave one family out; for each fold the checkpoint's configuration is trained
  again without the family: from scratch, or, for a transferred inspector, fine-tuned from its
  source. With ``retrain_source`` the source is first retrained without the family (its own
  family fold: :func:`source_split_for`); otherwise the fold is labelled "family seen in
  source". ``driple evaluate`` and ``scripts/reproduce.py`` both call :func:`evaluate`.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.estimator_registry import make_estimator
from driple.inspector.estimators import CheckpointEstimator, Estimator, GNNEstimator, TransferEstimator
from driple.inspector.jobs import job_table
from driple.inspector.noise import floor_check
from driple.inspector.scores import score_table
from driple.inspector.splits import Split, family_split, holdout_split, make_splits, random_split

DEFAULT_BASELINES = ("mean", "hgb", "knn")
ARRAYS = ("measured", "predictions", "calibration_measured", "calibration_predictions", "network")


# ---------------------------------------------------------------------- the harness
def run_folds(dataset, folds: Sequence[Split], estimators: Mapping[str, Callable[[Split], Estimator]],
              floor: Optional[dict] = None, progress: bool = True, test_dataset=None) -> dict:
    """Fit every estimator on every fold, score on the test jobs (see the module doc).

    ``test_dataset``: the folds' test positions index this dataset instead (jobs measured apart,
    e.g. the out-of-zoo set); train, val and calibration stay in ``dataset``.

    Returns ``{"split", "setting", "dataset", "targets", "estimators", "folds", "scores",
    "fold_mean", "wins", "notes", "noise_floor", "floor_check"}``; each fold keeps its
    ``measured`` and ``predictions`` arrays (test jobs) and ``calibration_*`` ones, and for an
    estimator joined with a roofline its network's own validation and test predictions
    (``network``, for :func:`~driple.inspector.roofline_estimator.rejoin`; :func:`to_json` drops
    them all).
    """
    if not folds:
        raise DripleError("no fold to evaluate")
    names = list(dataset.target_names)
    targets = np.asarray(dataset.targets, dtype=np.float64)
    test_ds = dataset if test_dataset is None else test_dataset
    if list(test_ds.target_names) != names:
        raise DripleError(f"the test jobs carry targets {list(test_ds.target_names)}, the training "
                          f"jobs {names}: they must be the same")
    test_targets = np.asarray(test_ds.targets, dtype=np.float64)
    ids = test_ds.job_ids
    out_folds, notes = [], {}
    for fold in folds:
        if test_dataset is None:
            fold.check()
        else:  # positions of two datasets: only the training side can overlap itself
            Split(fold.kind, train=fold.train, val=fold.val, test=[], calibration=fold.calibration).check()
        if not fold.test:
            raise DripleError(f"the fold holding out {fold.held_out or 'test jobs'} has no test jobs")
        entry = {"kind": fold.kind, "held_out": fold.held_out,
                 **{f"n_{p}": len(getattr(fold, p)) for p in ("train", "val", "calibration", "test")},
                 "test_job_ids": [ids[i] for i in fold.test], "scores": {}, "seconds": {},
                 "notes": {}, "measured": test_targets[fold.test], "predictions": {},
                 "calibration_measured": targets[fold.calibration], "calibration_predictions": {}}
        for name, factory in estimators.items():
            start = time.perf_counter()
            estimator = factory(fold).fit(dataset, fold.train, fold.val)
            if hasattr(estimator, "predict_parts"):  # a network joined with a roofline: keep its own too
                inner, pred = estimator.predict_parts(test_ds, fold.test)
            else:
                inner, pred = None, estimator.predict(test_ds, fold.test)
            pred = _checked(pred, len(fold.test), len(names), name)
            entry["predictions"][name] = pred
            entry["calibration_predictions"][name] = (
                _checked(estimator.predict(dataset, fold.calibration), len(fold.calibration),
                         len(names), name) if fold.calibration else np.zeros((0, len(names))))
            entry["seconds"][name] = time.perf_counter() - start
            if inner is not None:  # for rejoin: the network's own validation and test predictions
                entry.setdefault("network", {})[name] = {
                    "train_job_ids": [dataset.job_ids[i] for i in fold.train],
                    "val_job_ids": [dataset.job_ids[i] for i in fold.val], "val": estimator.inner_val_,
                    "test": _checked(inner, len(fold.test), len(names), name)}
            entry["scores"][name] = score_table(entry["measured"], pred, names)
            note = getattr(estimator, "note_", None)
            if note:
                entry["notes"][name] = note
                notes.setdefault(name, [])
                if note not in notes[name]:
                    notes[name].append(note)
            if progress:
                where = f"holding out {fold.held_out}" if fold.held_out else fold.kind
                print(f"  {where}: {name} fitted and scored in {entry['seconds'][name]:.1f} s "
                      f"(mean NRMSE {_num(entry['scores'][name]['mean']['nrmse'])})",
                      file=sys.stderr, flush=True)
        out_folds.append(entry)
    measured = np.concatenate([f["measured"] for f in out_folds])
    pooled = {name: score_table(measured, np.concatenate([f["predictions"][name] for f in out_folds]), names)
              for name in estimators}
    report = {
        "split": folds[0].kind, "setting": getattr(dataset, "setting", None),
        "dataset": str(getattr(dataset, "root", "")), "targets": names,
        "test_dataset": None if test_dataset is None else str(getattr(test_dataset, "root", "")),
        "estimators": list(estimators), "folds": out_folds, "n_test": int(len(measured)),
        "scores": pooled, "fold_mean": _mean_tables(out_folds, names), "wins": win_counts(pooled, names),
        "notes": notes, "noise_floor": None, "floor_check": None,
    }
    if floor is not None:
        report["noise_floor"] = {k: v for k, v in floor.items() if k != "jobs"} | {"n_jobs": len(floor["jobs"])}
        report["floor_check"] = {key: floor_check(pooled, floor, key=key) for key in ("nrmse", "mape")}
    return report


def _checked(pred, rows: int, cols: int, name: str) -> np.ndarray:
    pred = np.asarray(pred, dtype=np.float64)
    if pred.shape != (rows, cols):
        raise DripleError(f"estimator {name!r} predicted an array of shape {pred.shape}, not ({rows}, {cols})")
    return pred


def _num(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def win_counts(scores: Mapping[str, dict], names: Sequence[str]) -> dict:
    """``{"nrmse": {estimator: n}, "mape": {...}}``: on how many targets each has the lowest
    error (ties count for every tied estimator; targets without errors count for none)."""
    out = {}
    for key in ("nrmse", "mape"):
        counts = {name: 0 for name in scores}
        for target in names:
            errors = {n: t[target][key] for n, t in scores.items() if t[target][key] is not None}
            if errors:
                best = min(errors.values())
                for n, e in errors.items():
                    counts[n] += int(e <= best)
        out[key] = counts
    return out


def _mean_tables(folds: list[dict], names: Sequence[str]) -> dict:
    """Per target the mean over folds of each estimator's NRMSE and MAPE (folds lacking one skipped)."""
    out = {}
    for name in folds[0]["scores"]:
        table = {}
        for target in (*names, "mean"):
            entry = {}
            for key in ("nrmse", "mape"):
                vals = [f["scores"][name][target][key] for f in folds
                        if f["scores"][name][target][key] is not None]
                entry[key] = float(np.mean(vals)) if vals else None
            table[target] = entry
        out[name] = table
    return out


# ---------------------------------------------------------------------- a checkpoint's evaluation
def checkpoint_split(predictor, dataset, seed: int = 0) -> Split:
    """The split recorded in the checkpoint if it is a four-part architecture-grouped split whose
    test jobs are all in ``dataset``; else a seeded random split whose test part leaves out every
    job, and every architecture, the inspector was trained or validated on."""
    record = predictor.info.get("split") or {}
    if record.get("test") and record.get("group_by") == "architecture":
        split = Split.from_dict(record, dataset)
        if len(split.test) == len(record["test"]):
            return split
    split = random_split(dataset, seed=seed)
    seen = set(record.get("train") or []) | set(record.get("val") or [])
    table = job_table(dataset)
    seen_archs = set(table.loc[table["job_id"].isin(seen), "architecture"])
    split.test = [i for i in split.test
                  if table["job_id"][i] not in seen and table["architecture"][i] not in seen_archs]
    if not split.test:
        raise DripleError("every test job of a fresh random split (or its architecture) was used to "
                          "train this inspector; evaluate with --split family, on another dataset, "
                          "or retrain")
    return split


def own_jobs(predictor, progress: bool = False) -> tuple:
    """``(dataset, split)``: the dataset the checkpoint records, its graphs built as the
    checkpoint's were (groups, grouping, features, seed), and :func:`checkpoint_split` of it:
    what a script needs to fit a member again on the inspector's own training jobs."""
    from driple.inspector.dataset import dataset_built_as

    root = predictor.info.get("dataset")
    if not root:
        raise DripleError(f"the {predictor.setting} inspector records no dataset: its training jobs are unknown")
    dataset = dataset_built_as(predictor, root, progress=progress)
    return dataset, checkpoint_split(predictor, dataset)


def external_split(predictor, dataset, external, seed: int = 0) -> Split:
    """The checkpoint's train / val / calibration jobs of ``dataset`` with every job of
    ``external`` as the test part (positions into ``external``), kind ``external``. Refused: a
    dataset of another setting, and any external job that is also a job of ``dataset``."""
    predictor.check_compatible(external.feature_set, external.vocab_digest, what=f"dataset {external.root}")
    if getattr(external, "setting", None) != getattr(dataset, "setting", None):
        raise DripleError(f"the external jobs ran in {getattr(external, 'setting', None)}, the inspector's "
                          f"dataset in {getattr(dataset, 'setting', None)}: score it on jobs of its setting")
    shared = sorted(set(external.job_ids) & set(dataset.job_ids))
    if shared:
        raise DripleError(f"{len(shared)} external job(s) are also in the inspector's dataset "
                          f"(e.g. {shared[0]}): an external set must hold other jobs")
    record = predictor.info.get("split") or {}
    own = Split.from_dict(record, dataset) if record.get("train") else random_split(dataset, seed=seed)
    if not own.train:
        raise DripleError("none of the checkpoint's training jobs is in its dataset: pass the dataset "
                          "it was trained on")
    return Split("external", train=own.train, val=own.val, calibration=own.calibration,
                 test=list(range(len(external))), seed=own.seed,
                 held_out=f"the jobs of {getattr(external, 'root', 'the external set')}")


def source_split_for(fold: Split, dataset, source_dataset, seed: int = 0) -> Optional[Split]:
    """The split of ``source_dataset`` on whose train/val jobs a transferred inspector's source
    is retrained for ``fold`` of ``dataset``: for a family fold, the source's own fold holding
    out that family (the same jobs as the source setting's family evaluation, so a shared cache
    trains it once); for another fold, the source jobs of the test jobs' architectures held out.
    None when the source has no job to hold out (it never saw them)."""
    source_table = job_table(source_dataset)
    if fold.kind == "family":
        if fold.held_out not in set(source_table["family"]):
            return None
        return family_split(source_dataset, fold.held_out, seed)
    archs = set(job_table(dataset)["architecture"].iloc[fold.test])
    test = [i for i, a in enumerate(source_table["architecture"]) if a in archs]
    if not test:
        return None
    return holdout_split(source_dataset, test, seed, kind="source",
                         held_out=f"the {len(archs)} test architectures")


def evaluate(
    predictor,
    dataset,
    split: str = "random",
    baselines: Sequence[str] = DEFAULT_BASELINES,
    seed: Optional[int] = None,
    progress: bool = True,
    families: Optional[Sequence[str]] = None,
    overrides: Optional[dict] = None,
    source=None,
    source_dataset=None,
    retrain_source: bool = False,
    floor: Optional[dict] = None,
    cache: Optional[dict] = None,
    retrain: bool = False,
    external=None,
    with_inspector: bool = True,
) -> dict:
    """Evaluate the trained inspector ``predictor`` (column ``inspector``) beside the estimators
    named in ``baselines`` (see :func:`~driple.inspector.estimators.make_estimator`) on a
    ``"random"`` or ``"family"`` split of ``dataset`` (module doc).

    ``families`` limits a family split to those held-out families. ``overrides`` replace
    training options of every retraining (e.g. ``{"epochs": 5}``). A transferred inspector
    (``predictor.info["transfer"]``) needs its ``source`` inspector for a family split, and
    ``source_dataset`` with ``retrain_source=True`` to retrain the source per fold. ``floor``:
    a :func:`~driple.inspector.noise.noise_floor` to judge the errors against. ``cache``: a
    dict shared between calls, so that a training done once (same jobs, model, options) is
    reused. ``retrain``: a random split retrains the checkpoint's configuration on a fresh
    split (as a family split does per fold) instead of scoring the checkpoint as trained; implied
    by ``retrain_source``. ``external``: a dataset of other jobs of the same setting (e.g. the
    out-of-zoo set) scored as the test part instead, by the inspector as trained and baselines
    fitted on the checkpoint's own train/val jobs (its calibration jobs give the intervals).
    ``with_inspector=False``: only the ``baselines``, on the same folds (the checkpoint gives the
    split, seed and options; nothing is retrained for the inspector column: a family split of
    table models and rooflines in seconds).
    """
    seed = predictor.info.get("training", {}).get("seed", 0) if seed is None else seed
    predictor.check_compatible(dataset.feature_set, dataset.vocab_digest, what=f"dataset {dataset.root}")
    transfer = predictor.info.get("transfer")
    if not with_inspector:
        if not baselines:
            raise DripleError("nothing to evaluate: no inspector column and no estimator named")
        source = source_dataset = None
        retrain_source = False
    if with_inspector and transfer and (split == "family" or retrain) and source is None:
        raise DripleError(f"this inspector was transferred from {transfer.get('from_setting')}: "
                          "retraining it fine-tunes it again per fold, which needs its source inspector")
    if retrain_source and (not transfer or source is None or source_dataset is None):
        raise DripleError("retraining the source needs a transferred inspector, its source inspector "
                          "and the source's dataset")
    from driple.inspector.train import recorded_options

    options = recorded_options(predictor, {**(overrides or {}), "seed": seed})
    if external is not None:
        folds = [external_split(predictor, dataset, external, seed)]
        inspector = lambda fold: CheckpointEstimator(predictor)  # noqa: E731
    elif split == "random" and not (retrain or retrain_source):
        folds = [checkpoint_split(predictor, dataset, seed)]
        note = None
        if transfer:
            note = f"test architectures may be in the source's training ({transfer.get('from_setting')})"
        inspector = lambda fold: CheckpointEstimator(predictor, note=note)  # noqa: E731
    else:
        folds = make_splits(dataset, split, seed, families)
        inspector = None if not with_inspector else _inspector_factory(
            predictor, dataset, options, overrides, seed, source,
            source_dataset if retrain_source else None, progress, cache)
    factories = {"inspector": inspector} if with_inspector else {}
    for name in baselines:
        if name == "inspector":
            raise DripleError("'inspector' is the checkpoint's own column; name other estimators")
        make_estimator(name)  # unknown names fail before any training
        factories[name] = (lambda n: lambda fold: make_estimator(n, seed=seed, options=options,
                                                                 progress=progress, cache=cache))(name)
    report = run_folds(dataset, folds, factories, floor=floor, progress=progress, test_dataset=external)
    report.update(checkpoint_setting=predictor.setting, seed=seed,
                  inspector=("not evaluated" if not with_inspector
                             else "as trained" if external is not None or (split == "random" and not (retrain or retrain_source))
                             else "retrained per fold"),
                  transfer={"from_setting": transfer.get("from_setting"), "scheme": transfer.get("scheme"),
                            "source_retrained": bool(retrain_source)} if transfer else None)
    return report


def _inspector_factory(predictor, dataset, options, overrides, seed, source, source_dataset,
                       progress, cache) -> Callable[[Split], Estimator]:
    """Per fold: the checkpoint's configuration trained again (scratch or transferred), with
    its tree member and its roofline fitted again on the fold too when it has them."""
    network = _network_factory(predictor, dataset, options, overrides, seed, source, source_dataset,
                               progress, cache)
    made = network
    if predictor.trees is not None:
        from driple.inspector.baselines import HGBPriors
        from driple.inspector.estimators import EnsembleEstimator

        host = predictor.trees.inputs.host
        made = lambda fold: EnsembleEstimator([network(fold), HGBPriors(random_state=seed, host=host)],  # noqa: E731
                                              name="inspector")
    if predictor.roofline is None:
        return made
    from driple.inspector.roofline_estimator import WithRoofline

    return lambda fold: WithRoofline(made(fold), host=predictor.roofline.host, name="inspector")


def _network_factory(predictor, dataset, options, overrides, seed, source, source_dataset,
                     progress, cache) -> Callable[[Split], Estimator]:
    """Per fold: the checkpoint's network trained again (scratch or transferred)."""
    transfer = predictor.info.get("transfer")
    if not transfer:
        return lambda fold: GNNEstimator.from_checkpoint(predictor, options=options, progress=progress,
                                                         cache=cache, name="inspector")
    scheme = transfer.get("scheme", "paper")
    source_overrides = {**(overrides or {}), "seed": seed}

    def make(fold: Split) -> Estimator:
        if source_dataset is not None:
            ssplit = source_split_for(fold, dataset, source_dataset, seed)
            if ssplit is not None:
                return TransferEstimator(source, scheme, options=options, source_dataset=source_dataset,
                                         source_split=ssplit, overrides=source_overrides,
                                         progress=progress, cache=cache)
            return TransferEstimator(source, scheme, options=options, progress=progress)
        what = f"family {fold.held_out}" if fold.kind == "family" else "test architectures"
        return TransferEstimator(source, scheme, options=options, progress=progress,
                                 note=f"{what} seen in source ({transfer.get('from_setting')})")

    return make


# ---------------------------------------------------------------------- output
def rows_array(rows) -> np.ndarray:
    """Rows of a JSON table (:func:`to_json` writes a missing value as None) as a float array
    (NaN)."""
    return np.asarray([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64)


def to_json(report: dict) -> dict:
    """``report`` without the prediction arrays (plain types, JSON-ready)."""
    def clean(obj):
        if isinstance(obj, dict):
            return {str(k): clean(v) for k, v in obj.items() if k not in ARRAYS}
        if isinstance(obj, (list, tuple)):
            return [clean(v) for v in obj]
        if isinstance(obj, np.ndarray):
            return clean(obj.tolist())
        if isinstance(obj, np.generic):
            obj = obj.item()
        if isinstance(obj, float) and not math.isfinite(obj):
            return None
        return obj

    return clean(report)


def _title(report: dict) -> list[str]:
    where = f"setting: {report['setting']}   dataset: {report['dataset']}"
    if report.get("checkpoint_setting") and report["checkpoint_setting"] != report["setting"]:
        where += f"   (inspector trained on {report['checkpoint_setting']})"
    folds = report["folds"]
    if report["split"] == "family":
        what = (f"split: family, {len(folds)} fold(s) (one per held-out family), "
                f"{report['n_test']} test jobs pooled")
    elif report.get("test_dataset"):
        f = folds[0]
        what = (f"test: {f['n_test']} jobs of {report['test_dataset']} (fitted on the inspector's "
                f"train {f['n_train']} / val {f['n_val']} jobs; calibration {f['n_calibration']})")
    else:
        f = folds[0]
        what = (f"split: {f['kind']} by architecture (train {f['n_train']}, val {f['n_val']}, "
                f"calibration {f['n_calibration']}, test {f['n_test']} jobs)")
    lines = [where, what]
    if report.get("noise_floor"):
        nf = report["noise_floor"]
        lines.append(f"noise floor: {nf['again']} ({nf['n_jobs']} jobs measured twice)")
    return lines


def format_table(report: dict, key: str = "nrmse") -> list[str]:
    """Per target: the noise floor (if any), each estimator's pooled error, the best and, with a
    floor, whether it is within 2x; then the mean over targets and the win counts."""
    models = report["estimators"]
    width = max(9, *(len(m) + 1 for m in models))
    pct = key == "mape"
    has_floor = report.get("floor_check") is not None

    def cell(v):
        if v is None:
            return f"{'-':>{width}s}"
        return f"{v:>{width}.1f}" if pct else f"{v:>{width}.3f}"

    label = "MAPE % on test jobs" if pct else "NRMSE on test jobs"
    head = f"{label:28s}" + (f"{'floor':>{width}s}" if has_floor else "")
    head += "".join(f"{m:>{width}s}" for m in models) + "   best"
    if has_floor:
        head += "      vs floor"
    lines = [head]
    for target in report["targets"]:
        row = f"{target:28s}"
        check = (report["floor_check"] or {}).get(key, {}).get(target) if has_floor else None
        if has_floor:
            row += cell(check["floor"] if check else None)
        errors = {m: report["scores"][m][target][key] for m in models}
        row += "".join(cell(errors[m]) for m in models)
        known = {m: e for m, e in errors.items() if e is not None}
        best = min(known, key=known.get) if known else "-"
        row += f"   {best:{max(4, width - 1)}s}"
        if has_floor and check and check["ratio"] is not None:
            row += f" {ratio_text(check['ratio']):>6s} {'ok' if check['within'] else 'over 2x'}"
        lines.append(row)
    mean = f"{'mean over targets':28s}" + (cell(None) if has_floor else "")
    lines.append(mean + "".join(cell(report["scores"][m]["mean"][key]) for m in models))
    wins = f"{'targets won':28s}" + (f"{'':>{width}s}" if has_floor else "")
    lines.append(wins + "".join(f"{report['wins'][key][m]:>{width}d}" for m in models))
    return lines


def ratio_text(ratio: float) -> str:
    """``2.1x``; ``>100x`` for a floor so small (an exact label) that the ratio says nothing more."""
    return ">100x" if ratio > 100 else f"{ratio:.1f}x"


def format_report(report: dict) -> str:
    """The report as text: NRMSE and MAPE tables per target, notes, per-fold means."""
    lines = _title(report) + [""] + format_table(report, "nrmse") + [""] + format_table(report, "mape")
    if report.get("notes"):
        lines += ["", "notes:"] + [f"  {m}: {'; '.join(n)}" for m, n in report["notes"].items()]
    if report["split"] == "family":
        models = report["estimators"]
        width = max(16, *(len(m) + 2 for m in models))
        lines += ["", f"{'held-out family (test jobs)':28s}" + "".join(f"{m:>{width}s}" for m in models)
                  + "   (mean over targets: NRMSE, MAPE %)"]
        for fold in report["folds"]:
            row = f"{fold['held_out'] + ' (' + str(fold['n_test']) + ')':28s}"
            for m in models:
                e = fold["scores"][m]["mean"]
                text = f"{_num(e['nrmse'])} {'-' if e['mape'] is None else format(e['mape'], '.0f')}"
                row += f"{text:>{width}s}"
            lines.append(row)
    return "\n".join(lines)


def plot_predictions(report: dict, path: str, models: Sequence[str] = ("inspector", "hgb")) -> str:
    """Predicted vs measured scatter per target (3 per row), test jobs of all folds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from driple.metrics import unit

    measured = np.concatenate([f["measured"] for f in report["folds"]])
    models = [m for m in models if m in report["folds"][0]["predictions"]]
    preds = {m: np.concatenate([f["predictions"][m] for f in report["folds"]]) for m in models}
    names = report["targets"]
    rows = -(-len(names) // 3)
    fig, axes = plt.subplots(rows, 3, figsize=(11, 3.25 * rows), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    markers = {"inspector": ("o", "tab:blue"), "hgb": ("x", "tab:orange"),
               "knn": ("+", "tab:green"), "mean": (".", "tab:gray")}
    for j, (metric, ax) in enumerate(zip(names, axes.flat)):
        y = measured[:, j]
        ok = np.isfinite(y)
        for m in models:
            marker, color = markers.get(m, ("o", None))
            nrmse = report["scores"][m][metric]["nrmse"]
            label = f"{m} (NRMSE {nrmse:.2f})" if nrmse is not None else m
            ax.scatter(y[ok], preds[m][ok, j], s=14, marker=marker, color=color, alpha=0.7, label=label)
        if ok.any() and models:
            lo = min(np.nanmin(y[ok]), min(np.nanmin(preds[m][ok, j]) for m in models))
            hi = max(np.nanmax(y[ok]), max(np.nanmax(preds[m][ok, j]) for m in models))
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_title(metric, fontsize=9)
        try:
            u = unit(metric)
        except DripleError:
            u = "?"
        ax.set_xlabel(f"measured ({u})", fontsize=8)
        ax.set_ylabel(f"predicted ({u})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(f"{report['setting']} — {report['split']} split, test jobs", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
