"""Scoring an inspector next to baselines fitted on the same jobs in the same run.

- ``random``: the checkpoint's own test jobs (the split recorded at training time, when the
  dataset holds them; otherwise a seeded random split minus the jobs the inspector was
  trained on, e.g. for another setting's dataset) — the inspector as trained.
- ``family``: leave-one-model-family-out cross-validation — for every family a fresh
  inspector with the checkpoint's configuration and options is trained without it and scored
  on it; per-family tables and their mean.

Baselines (:mod:`driple.inspector.baselines`) are fitted on the train + validation jobs of the
same split: the training mean and tabular regressors on graph-level attributes.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.baselines import make_baseline
from driple.inspector.checkpoint import TrainedInspector
from driple.inspector.scores import score_table
from driple.inspector.splits import Split, family_splits, random_split
from driple.metrics import target_names

DEFAULT_BASELINES = ("mean", "gbr")


def _rows(dataset, idx: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    return dataset.graph_attrs[list(idx)], dataset.targets[list(idx)]


def evaluate_split(predictor: TrainedInspector, dataset, split: Split,
                   baselines: Sequence[str] = DEFAULT_BASELINES, seed: int = 0) -> dict:
    """Scores of ``predictor`` and of ``baselines`` on ``split.test``; predictions included."""
    if not split.test:
        raise DripleError("the split has no test jobs")
    predictor.check_compatible(dataset.feature_set, dataset.vocab_digest,
                               what=f"dataset {dataset.root}")
    fit_idx = sorted(set(split.train) | set(split.val))
    X_fit, y_fit = _rows(dataset, fit_idx)
    X_test, y_test = _rows(dataset, split.test)
    predictions = {"inspector": predictor.predict([dataset[i] for i in split.test])}
    for name in baselines:
        predictions[name] = make_baseline(name, random_state=seed).fit(X_fit, y_fit).predict(X_test)
    return {
        "split": split.kind,
        "held_out": split.held_out,
        "n_train": len(split.train), "n_val": len(split.val), "n_test": len(split.test),
        "scores": {name: score_table(y_test, pred) for name, pred in predictions.items()},
        "measured": y_test,
        "predictions": predictions,
        "test_job_ids": [dataset.job_ids[i] for i in split.test],
    }


def checkpoint_split(predictor: TrainedInspector, dataset, seed: int = 0) -> Split:
    """The split recorded in the checkpoint (random or family) if ``dataset`` holds all its test
    jobs; else a fresh seeded random split whose test part leaves out every job the inspector
    was trained or validated on."""
    record = predictor.info.get("split") or {}
    if record.get("test"):
        split = Split.from_dict(record, dataset)
        if len(split.test) == len(record["test"]):
            return split
    split = random_split(dataset, seed=seed)
    seen = set(record.get("train", [])) | set(record.get("val", []))
    ids = dataset.job_ids
    split.test = [i for i in split.test if ids[i] not in seen]
    if not split.test:
        raise DripleError("every test job of the random split was used to train this inspector; "
                          "evaluate on another dataset or retrain")
    return split


def _mean_tables(folds: list[dict]) -> dict:
    """Per-metric mean over folds of each model's NRMSE and MAPE (folds lacking a value skipped)."""
    out = {}
    for name in folds[0]["scores"]:
        table = {}
        for metric in (*target_names(), "mean"):
            entry = {}
            for key in ("nrmse", "mape"):
                vals = [f["scores"][name][metric][key] for f in folds
                        if f["scores"][name][metric][key] is not None]
                entry[key] = float(np.mean(vals)) if vals else None
            table[metric] = entry
        out[name] = table
    return out


def evaluate(
    predictor: TrainedInspector,
    dataset,
    split: str = "random",
    baselines: Sequence[str] = DEFAULT_BASELINES,
    seed: Optional[int] = None,
    progress: bool = True,
    families: Optional[Sequence[str]] = None,
    overrides: Optional[dict] = None,
    finetune_from: Optional[TrainedInspector] = None,
) -> dict:
    """Evaluate on ``dataset`` with a ``"random"`` or ``"family"`` split (see module doc);
    ``families`` limits a family split to these held-out families (default: all).
    ``overrides`` replace training options of the family retraining (e.g. ``{"epochs": 80}``);
    with ``finetune_from`` each fold's model is transferred from that source inspector (the
    paper's scheme) instead of trained from scratch, as a target setting's inspector is.

    Returns ``{"split", "setting", "dataset", "scores": {model: table}, "folds": [...]}`` where a
    table is :func:`score_table`'s; for ``"family"`` ``scores`` is the mean over folds.
    Each fold keeps ``measured`` and ``predictions`` arrays (see :func:`to_json` to drop them).
    """
    from driple.inspector.train import TrainOptions, train_inspector

    seed = predictor.info.get("training", {}).get("seed", 0) if seed is None else seed
    report = {"split": split, "setting": dataset.setting, "dataset": str(dataset.root),
              "checkpoint_setting": predictor.setting, "baselines": list(baselines)}
    if split == "random":
        fold = evaluate_split(predictor, dataset, checkpoint_split(predictor, dataset, seed),
                              baselines, seed)
        report.update(scores=fold["scores"], folds=[fold])
        return report
    if split != "family":
        raise DripleError(f"unknown split {split!r}; use 'random' or 'family'")
    config = predictor.model.config()
    known = {k: v for k, v in predictor.info.get("training", {}).items()
             if k in TrainOptions.__dataclass_fields__}
    options = TrainOptions(**{**known, **(overrides or {}), "seed": seed})
    splits = family_splits(dataset, seed=seed)
    if families:
        unknown = sorted(set(families) - {s.held_out for s in splits})
        if unknown:
            raise DripleError(f"no job of family {', '.join(unknown)} in {dataset.root}")
        splits = [s for s in splits if s.held_out in set(families)]
    folds = []
    for fold_split in splits:
        if finetune_from is not None:
            from driple.inspector.transfer import finetune

            fold_model = finetune(finetune_from, dataset, split=fold_split, scheme="paper",
                                  options=options, progress=progress)
            folds.append(evaluate_split(fold_model, dataset, fold_split, baselines, seed))
            continue
        fold_model = train_inspector(
            dataset, fold_split, hidden_channels=config["hidden_channels"],
            num_repeats=config["num_repeats"], set2set_steps=config["set2set_steps"],
            dropout=config["dropout"], graph_attr=bool(config.get("graph_channels")),
            options=options, progress=progress)
        folds.append(evaluate_split(fold_model, dataset, fold_split, baselines, seed))
    report.update(scores=_mean_tables(folds), folds=folds)
    return report


def to_json(report: dict) -> dict:
    """``report`` without the prediction arrays (plain types, JSON-ready)."""
    def clean(obj):
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if k not in ("measured", "predictions")}
        if isinstance(obj, (list, tuple)):
            return [clean(v) for v in obj]
        if isinstance(obj, float) and not math.isfinite(obj):
            return None
        if isinstance(obj, np.generic):
            return obj.item()
        return obj

    return clean(report)


def format_report(report: dict) -> str:
    """A plain-text table: per metric, NRMSE and MAPE of the inspector and each baseline."""
    models = list(report["scores"])

    def cell(v, pct=False):
        return "   -  " if v is None else (f"{v:6.1f}" if pct else f"{v:6.3f}")

    head = f"{'metric':28s}" + "".join(f"{m:>17s}" for m in models)
    sub = f"{'':28s}" + "".join(f"{'NRMSE':>9s}{'MAPE%':>8s}" for _ in models)
    lines = []
    n = report["folds"][0]
    title = f"split: {n['split'] if report['split'] == 'random' else 'family'}"
    if n.get("held_out"):
        title += f" holding out {n['held_out']!r}"
    if report["split"] == "random":
        title += f"  (train {n['n_train']}, val {n['n_val']}, test {n['n_test']} jobs)"
    else:
        title += f"  ({len(report['folds'])} folds; mean over held-out families)"
    where = f"setting: {report['setting']}   dataset: {report['dataset']}"
    if report.get("checkpoint_setting") and report["checkpoint_setting"] != report["setting"]:
        where += f"   (inspector trained on {report['checkpoint_setting']})"
    lines += [where, title, head, sub]
    for metric in (*target_names(), "mean"):
        row = f"{metric:28s}"
        for m in models:
            e = report["scores"][m][metric]
            row += f"   {cell(e['nrmse'])} {cell(e['mape'], True)}"
        lines.append(row)
    if report["split"] == "family":
        lines.append("")
        lines.append(f"{'held-out family':28s}" + "".join(f"{m:>17s}" for m in models)
                     + "   (mean NRMSE, MAPE%)")
        for fold in report["folds"]:
            name = f"{fold['held_out']} ({fold['n_test']})"
            row = f"{name:28s}"
            for m in models:
                e = fold["scores"][m]["mean"]
                row += f"   {cell(e['nrmse'])} {cell(e['mape'], True)}"
            lines.append(row)
    return "\n".join(lines)


def plot_predictions(report: dict, path: str, models: Sequence[str] = ("inspector", "gbr")) -> str:
    """Predicted vs measured scatter per target (3 per row) for the report's folds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from driple.metrics import unit

    measured = np.concatenate([f["measured"] for f in report["folds"]])
    models = [m for m in models if m in report["folds"][0]["predictions"]]
    preds = {m: np.concatenate([f["predictions"][m] for f in report["folds"]]) for m in models}
    names = target_names()
    rows = -(-len(names) // 3)
    fig, axes = plt.subplots(rows, 3, figsize=(11, 3.25 * rows), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    markers = {"inspector": ("o", "tab:blue"), "gbr": ("x", "tab:orange"),
               "knn": ("+", "tab:green"), "mean": (".", "tab:gray")}
    for j, (metric, ax) in enumerate(zip(names, axes.flat)):
        y = measured[:, j]
        ok = np.isfinite(y)
        for m in models:
            marker, color = markers.get(m, ("o", None))
            nrmse = report["scores"][m][metric]["nrmse"]
            label = f"{m} (NRMSE {nrmse:.2f})" if nrmse is not None else m
            ax.scatter(y[ok], preds[m][ok, j], s=14, marker=marker, color=color, alpha=0.7,
                       label=label)
        if ok.any():
            lo = min(np.nanmin(y[ok]), min(np.nanmin(preds[m][ok, j]) for m in models))
            hi = max(np.nanmax(y[ok]), max(np.nanmax(preds[m][ok, j]) for m in models))
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel(f"measured ({unit(metric)})", fontsize=8)
        ax.set_ylabel(f"predicted ({unit(metric)})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(f"{report['setting']} — {report['split']} split, test jobs", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
