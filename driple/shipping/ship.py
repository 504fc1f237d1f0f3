"""Turn a trained inspector into a shipped one: calibrated intervals, a model card, a registry entry.

Used by ``scripts/ship_inspectors.py``; kept in the library so the steps are tested and the
same for every setting:

1. :func:`calibrate` fits :class:`~driple.predict.intervals.ConformalIntervals` on the
   split's calibration jobs and measures their coverage on its test jobs (never seen in
   training or calibration);
2. :func:`ship` saves the checkpoint under ``trained_models/<setting>/``, writes
   ``MODEL_CARD.md`` and ``scores.json`` beside it and registers it with its checksum.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Optional

import numpy as np

from driple.metrics import target_names, unit
from driple.predict.intervals import ConformalIntervals, coverage
from driple.predict.predictor import measured_on


def _measured_predicted(inspector, dataset, idx):
    from driple.inspector.graph_inputs import stack_targets

    graphs = [dataset[i] for i in idx]
    measured = stack_targets(graphs)
    predicted = np.clip(inspector.predict(graphs), 0, None)
    return measured, predicted


def calibrate(inspector, dataset, split, nominal: float = 0.9, calibration=None) -> dict:
    """Fit intervals on the calibration jobs and measure coverage on ``split.test``; both are
    stored in ``inspector.info`` (``intervals``, ``interval_coverage``) and the coverage returned.

    ``calibration``: positions of the calibration jobs in ``dataset``; default the split's own
    ``calibration`` part when it has one, else ``split.val`` (the older splits, where validation
    and calibration were one set)."""
    source = "given"
    if calibration is None:
        own = getattr(split, "calibration", None)
        calibration, source = (own, "calibration") if own else (split.val, "validation")
    calibration = list(calibration)
    if len(calibration) < 2:
        raise ValueError("calibration needs at least two jobs")
    y_val, p_val = _measured_predicted(inspector, dataset, calibration)
    intervals = ConformalIntervals(coverage=nominal, names=tuple(inspector.targets)).fit(y_val, p_val)
    inspector.info["intervals"] = intervals.to_dict()
    result = {"nominal": nominal, "n_calibration": len(calibration),
              "calibrated_on": source}
    if split.test:
        y_test, p_test = _measured_predicted(inspector, dataset, split.test)
        low, high = intervals.interval(p_test)
        result.update(coverage(y_test, low, high, names=list(inspector.targets)), n=len(split.test))
    inspector.info["interval_coverage"] = result
    return result


def summary_scores(inspector) -> dict:
    """The registry's short score record: mean test NRMSE/MAPE, counts, interval coverage."""
    scores = inspector.info.get("scores", {})
    test = scores.get("test", {})
    split = inspector.info.get("split", {})
    cov = inspector.info.get("interval_coverage", {})
    return {
        "test_nrmse_mean": (test.get("mean") or {}).get("nrmse"),
        "test_mape_mean": (test.get("mean") or {}).get("mape"),
        "n_train": len(split.get("train", [])), "n_val": len(split.get("val", [])),
        "n_test": len(split.get("test", [])),
        "interval_coverage": cov.get("mean"), "nominal_coverage": cov.get("nominal"),
    }


def _versions() -> dict:
    import torch

    from driple import __version__

    try:
        import torch_geometric

        pyg = torch_geometric.__version__
    except ImportError:  # pragma: no cover
        pyg = None
    return {"driple": __version__, "torch": torch.__version__, "torch_geometric": pyg,
            "python": platform.python_version()}


def model_card(inspector, setting: str, description: str, trained: str, command: str,
               dataset_provenance: Optional[dict] = None) -> str:
    """Markdown model card: what was measured, how it was trained, held-out scores, command."""
    info = inspector.info
    split = info.get("split", {})
    training = info.get("training", {})
    history = info.get("history", {})
    from driple.inspector.model import members_of

    networks = members_of(inspector.model)
    config = networks[0].config()
    cov = info.get("interval_coverage", {})
    test = (info.get("scores") or {}).get("test", {})
    lines = [
        f"# Inspector for `{setting}`", "",
        description, "",
        "## Data",
        f"- dataset: `{info.get('dataset')}` (jobs measured by `driple collect sweep` on this "
        "project's CPU host; see its README and provenance.json)",
        f"- split: {split.get('kind', '?')} (seed {split.get('seed', '?')}), "
        f"{len(split.get('train', []))} train / {len(split.get('val', []))} validation / "
        f"{len(split.get('calibration', []))} calibration / {len(split.get('test', []))} test "
        "jobs; jobs measured on a busy host are left out",
    ]
    if dataset_provenance:
        host = dataset_provenance.get("host", {})
        lines.append(f"- measured on: {host.get('cpu_model', host.get('cpu', '?'))}, "
                     f"{host.get('cores', host.get('cpu_count', '?'))} cores (CPU labels: no GPU)")
    lines += [
        "", "## Training",
        f"- {trained}",
        f"- model: {_model_words(inspector, config)}"
        + (f"; {len(networks)} such networks, each trained alone (seeds {training.get('seed', 0)} to "
           f"{training.get('seed', 0) + len(networks) - 1}), their predictions averaged (geometric mean)"
           if len(networks) > 1 else ""),
        f"- builder: {json.dumps(info.get('builder', {}))}, feature set `{info.get('feature_set')}`, "
        f"op vocabulary {info.get('vocab_digest')}",
        f"- options: {json.dumps({k: training[k] for k in sorted(training)})}",
        f"- {_epochs_words(history)} in {history.get('seconds', 0):.0f} s",
        *selection_lines(info),
        "", "## Scores on the test jobs", "",
        "| metric | unit | NRMSE | MAPE | interval coverage |", "|---|---|---|---|---|",
    ]
    for m in target_names():
        e = test.get(m, {})
        c = cov.get(m)
        lines.append(f"| {m} | {unit(m)} | {_fmt(e.get('nrmse'))} | {_fmt(e.get('mape'), '%')} | "
                     f"{_fmt(c, 'frac')} |")
    mean = test.get("mean", {})
    lines.append(f"| **mean** | | {_fmt(mean.get('nrmse'))} | {_fmt(mean.get('mape'), '%')} | "
                 f"{_fmt(cov.get('mean'), 'frac')} |")
    lines += [
        "", f"Intervals: split conformal on log-ratio residuals of the {cov.get('n_calibration', '?')} "
        f"{cov.get('calibrated_on', 'validation')} jobs, nominal {_fmt(cov.get('nominal'), 'frac')}; the "
        f"coverage column is measured on the {cov.get('n', '?')} test jobs.",
        "", "## Reproduce", "", "```", command, "```", "",
        f"Trained {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} on "
        f"{platform.node() or 'this host'}; versions {json.dumps(_versions())}.",
    ]
    return "\n".join(lines) + "\n"


def selection_lines(info: dict) -> list:
    """The card's lines on how the configuration was chosen (``info["selection"]``, recorded by
    ``scripts/ship_inspectors.py --select-models``): the candidates' validation scores."""
    selection = info.get("selection")
    if not selection:
        return []
    ranked = sorted(selection.get("candidates", {}).items(), key=lambda kv: kv[1])
    unit = "%" if "mape" in selection.get("by", "") else ""
    scores = ", ".join(f"{name} {value:.3g}{unit}" for name, value in ranked)
    source = (info.get("transfer") or {}).get("from_setting")
    whose = f"the source's configuration, chosen on {source}'s" if source else "chosen on the"
    return [f"- {whose} validation jobs only ({selection.get('by', '?')}): "
            f"**{selection.get('chosen', '?')}** among {scores}"]


def _epochs_words(history: dict) -> str:
    """"120 epochs (best 118)", per network for an ensemble."""
    runs = history.get("networks") or [history]
    words = ", ".join(f"{h.get('epochs', '?')} (best {h.get('best_epoch', '?')})" for h in runs)
    return f"epochs per network: {words}" if len(runs) > 1 else words.replace(" (", " epochs (", 1)


def _model_words(inspector, config: dict) -> str:
    """The network in words: the paper's GNN, the hybrid or the features-only MLP."""
    kind = inspector.configuration
    inputs = inspector.graph_inputs
    priors = ""
    if inputs is not None:
        host = inputs.host
        priors = (f"; physical priors {', '.join(inputs.priors) or '-'} on host figures "
                  f"{host.flops_per_s / 1e9:.0f} GFLOP/s, {host.memory_bytes_per_s / 1e9:.0f} GB/s "
                  f"copy, loopback {host.loopback_bytes_per_s / 1e9:.2f} GB/s ({host.cpu_model or '?'}, "
                  f"{host.how})" + ("; predicts residuals over the priors" if inspector.residual else ""))
    if kind == "features":
        return (f"features only: MLP on {config.get('graph_channels')} graph-level inputs "
                f"(hidden {config.get('hidden_channels')}){priors}")
    head = (f"{config.get('graph_channels', 0)} graph-level inputs" if kind == "hybrid"
            else f"graph-level attributes: {config.get('graph_channels', 0)}")
    trees = ("; averaged (geometric mean) with gradient-boosted trees on the same graph-level "
             "inputs, fitted on the same training jobs" if inspector.trees is not None else "")
    return (f"{'hybrid' if kind == 'hybrid' else 'paper GNN'}: GCN {config.get('in_channels')}->"
            f"{config.get('hidden_channels')}, shared GCN+GRU x{config.get('num_repeats')}, Set2Set "
            f"({config.get('set2set_steps')} steps), MLP; {head}{priors}{trees}")


def _fmt(v, kind: str = "") -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if kind == "%":
        return f"{v:.1f}%"
    if kind == "frac":
        return f"{v:.0%}"
    return f"{v:.3f}"


def ship(inspector, setting: str, *, description: str, trained: str, command: str,
         root: Optional[Path] = None, default: bool = False, keep: Optional[dict] = None) -> dict:
    """Save ``inspector`` as the shipped one of ``setting`` with card, scores and registry entry;
    ``keep``: fields of the old entry that stay true of the new checkpoint (e.g. ``memory``, the
    simulator's fit, which no network or roofline changes)."""
    from driple.predict.registry import models_dir, register

    root = Path(root) if root is not None else models_dir()
    out = root / setting
    out.mkdir(parents=True, exist_ok=True)
    path = inspector.save(str(out))
    provenance = None
    dataset = inspector.info.get("dataset")
    if dataset and os.path.exists(os.path.join(dataset, "provenance.json")):
        try:
            provenance = json.loads(Path(dataset, "provenance.json").read_text())
        except ValueError:
            provenance = None
    (out / "MODEL_CARD.md").write_text(
        model_card(inspector, setting, description, trained, command, provenance))
    with open(out / "scores.json", "w") as f:
        json.dump({"setting": setting, "scores": inspector.info.get("scores"),
                   "interval_coverage": inspector.info.get("interval_coverage"),
                   "transfer": inspector.info.get("transfer")}, f, indent=2)
    return register(setting, path, description=description, trained=trained,
                    scores=summary_scores(inspector), card=f"{setting}/MODEL_CARD.md",
                    default=default, root=root, hardware=measured_on(inspector, provenance),
                    resident=training_resident(inspector), spec=training_spec(inspector), **(keep or {}))


def training_spec(inspector) -> Optional[dict]:
    """The measuring machine's spec (its dataset's recorded figures and cores, else the median
    probe of its training rows), or None."""
    from driple.hardware.rows import training_machine_spec

    dataset = inspector.info.get("dataset")
    train = (inspector.info.get("split") or {}).get("train")
    spec = training_machine_spec(dataset, train) if dataset else None
    return None if spec is None else spec.to_dict()


def training_resident(inspector) -> Optional[dict]:
    """The runtime's part of a worker's memory on the inspector's training jobs (registry
    ``resident``; :func:`driple.collect.resident.resident_memory_mb`), or None."""
    from driple.collect.resident import resident_memory_mb

    dataset = inspector.info.get("dataset")
    if not dataset or not os.path.exists(os.path.join(dataset, "results.csv")):
        return None
    train = (inspector.info.get("split") or {}).get("train")
    return resident_memory_mb(dataset, jobs=train)
