#!/usr/bin/env python
"""Regenerate the README's results from the shipped files only (datasets/ and trained_models/).

    python scripts/reproduce.py                         # every section, then the report
    python scripts/reproduce.py --sections accuracy     # one section (sections can run in
    python scripts/reproduce.py --sections transfer     #  parallel processes; each writes
    python scripts/reproduce.py --report                #  its JSON, --report merges them)

``--settings A B`` re-runs accuracy/transfer for those settings only and keeps the others'
entries; ``--keep`` keeps design rows that a run does not redo.

Sections (each writes trained_models/evaluation/<section>.json):

- ``labels``: relabel every shipped job from its raw series; the labels must be identical.
- ``retest``: the test-retest jobs against their first measurement: spread per metric.
- ``accuracy``: per shipped setting, NRMSE and MAPE on held-out jobs of the inspector, the
  training mean and GBR on graph-level features; random split (the shipped inspector's own
  test jobs) and leave-one-family-out (a model retrained per held-out family).
- ``transfer``: per target setting, transfer (paper scheme; MLP only) vs training from scratch
  at fractions of the target's training jobs: NRMSE and training time.
- ``design``: the paper's design study on the source setting: grouping policy (none /
  uniform / proportional) and the number K of repetitions of the shared layer.

The report (``results.md`` beside the JSON files) holds the tables the README quotes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASETS = os.path.join(ROOT, "datasets")
OUT = None  # <models dir>/evaluation, set in main()
SECTIONS = ("labels", "retest", "accuracy", "transfer", "design")
PAPER_MEAN_ERROR = {"compute": 11, "memory": 9, "tx": 17, "rx": 15}  # %, Driple Table (GPU)


def _save(section: str, data: dict) -> None:
    os.makedirs(OUT, exist_ok=True)
    data = {"section": section, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python scripts/reproduce.py " + " ".join(sys.argv[1:]), **data}
    with open(os.path.join(OUT, f"{section}.json"), "w") as f:
        json.dump(_plain(data), f, indent=2)


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    return obj


def _datasets() -> list[str]:
    from driple.predict.registry import list_settings

    return [e["setting"] for e in list_settings()]


def _dataset(setting, builder, workers=2):
    from driple.inspector.dataset import InspectorDataset

    return InspectorDataset(os.path.join(DATASETS, setting), groups=builder.get("groups", 100),
                            grouping=builder.get("grouping", "uniform"),
                            features=builder.get("features", "driple"), workers=workers)


# ---------------------------------------------------------------------- sections
def section_labels(args) -> None:
    from driple.collect.relabel import check_dataset

    out = {}
    for name in sorted(os.listdir(DATASETS)):
        if os.path.exists(os.path.join(DATASETS, name, "results.csv")):
            r = check_dataset(os.path.join(DATASETS, name), progress=not args.quiet)
            out[name] = {"jobs": r["jobs"], "identical": r["identical"],
                         "mismatched": len(r["mismatched"]), "errors": len(r["errors"])}
            print(f"labels {name}: {r['identical']} of {r['jobs']} identical", flush=True)
    _save("labels", {"datasets": out})


def section_retest(args) -> None:
    from driple.collect.results import load_results
    from driple.metrics import METRICS

    if not os.path.exists(os.path.join(DATASETS, "cpu-ddp-w2-lo-retest", "results.csv")):
        print("retest: no datasets/cpu-ddp-w2-lo-retest; skipped", flush=True)
        return
    first = load_results(os.path.join(DATASETS, "cpu-ddp-w2-lo")).set_index("job_id")
    again = load_results(os.path.join(DATASETS, "cpu-ddp-w2-lo-retest")).set_index("job_id")
    again = again[again["status"] == "ok"]
    jobs = [j for j in again.index if j in first.index and first.loc[j, "status"] == "ok"]
    a = first.loc[jobs, list(METRICS)].astype(float).to_numpy()
    b = again.loc[jobs, list(METRICS)].astype(float).to_numpy()
    rel = np.abs(a - b) / np.maximum((np.abs(a) + np.abs(b)) / 2, 1e-12)
    mean = (a + b) / 2
    # the NRMSE a perfect predictor of the first measurement would score against the second
    nrmse = np.sqrt(np.nanmean((a - b) ** 2, axis=0)) / np.abs(np.nanmean(mean, axis=0))
    table = {m: {"median_rel_diff": float(np.nanmedian(rel[:, j])),
                 "max_rel_diff": float(np.nanmax(rel[:, j])), "nrmse": float(nrmse[j])}
             for j, m in enumerate(METRICS)}
    table["mean"] = {"median_rel_diff": float(np.nanmean([table[m]["median_rel_diff"] for m in METRICS])),
                     "nrmse": float(np.nanmean(nrmse))}
    contention = {"first": first.loc[jobs, "host_other_cpu_pct"].astype(float).tolist(),
                  "again": again.loc[jobs, "host_other_cpu_pct"].astype(float).tolist()}
    print(f"retest: {len(jobs)} jobs, mean NRMSE between the two measurements "
          f"{table['mean']['nrmse']:.3f}", flush=True)
    _save("retest", {"jobs": jobs, "metrics": table, "host_other_cpu_pct": contention})


def section_accuracy(args) -> None:
    from driple.inspector.evaluate import evaluate
    from driple.predict.predictor import Predictor

    from driple.predict.registry import load_registry

    source_name = load_registry().get("default")
    out = _kept("accuracy", "settings", args.settings)
    for setting in args.settings or _datasets():
        inspector = Predictor.load(setting).inspector
        source = Predictor.load(source_name).inspector if setting != source_name else None
        ds = _dataset(setting, inspector.info.get("builder", {}))
        res = {}
        for split in ("random", "family"):
            t0 = time.perf_counter()
            report = evaluate(inspector, ds, split=split, baselines=("mean", "gbr"),
                              progress=not args.quiet, overrides=_overrides(args),
                              finetune_from=source)
            res[split] = {"scores": report["scores"], "seconds": time.perf_counter() - t0,
                          "folds": [{"held_out": f.get("held_out"), "n_test": f.get("n_test"),
                                     "scores": {k: v["mean"] for k, v in f["scores"].items()}}
                                    for f in report.get("folds", [])],
                          "n_test": sum(f.get("n_test", 0) for f in report.get("folds", []))}
            s = report["scores"]
            print(f"accuracy {setting} {split}: NRMSE inspector {s['inspector']['mean']['nrmse']:.3f} "
                  f"mean {s['mean']['mean']['nrmse']:.3f} gbr {s['gbr']['mean']['nrmse']:.3f}",
                  flush=True)
        out[setting] = {"jobs": len(ds), **res}
        _save("accuracy", {"settings": out})


def _kept(section: str, key: str, only) -> dict:
    """Entries of an earlier run of ``section`` to keep when only some settings are re-run."""
    if not only:
        return {}
    return {k: v for k, v in ((_load(section) or {}).get(key) or {}).items() if k not in only}


def _overrides(args) -> dict:
    return {k: v for k, v in (("epochs", args.epochs), ("patience", args.patience),
                              ("target_scaling", args.target_scaling)) if v is not None}


def section_transfer(args) -> None:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from transfer_study import run_study, summarize

    from driple.inspector.train import TrainOptions
    from driple.predict.predictor import Predictor
    from driple.predict.registry import load_registry

    source_name = load_registry().get("default")
    source = Predictor.load(source_name).inspector
    known = {k: v for k, v in source.info.get("training", {}).items()
             if k in TrainOptions.__dataclass_fields__}
    options = TrainOptions(**{**known, **_overrides(args)})
    out = _kept("transfer", "targets", args.settings)
    for target in args.settings or [s for s in _datasets() if s != source_name]:
        ds = _dataset(target, source.info.get("builder", {}))
        rows = run_study(source, ds, args.fractions, ["paper", "mlp", "scratch"], options,
                         progress=not args.quiet)
        out[target] = {"rows": rows, "summary": summarize(rows, args.tolerance),
                       "tolerance": args.tolerance}
        print("\n".join(out[target]["summary"]), flush=True)
        _save("transfer", {"source": source_name, "targets": out})


def section_design(args) -> None:
    from driple.inspector.splits import random_split
    from driple.inspector.train import TrainOptions, train_inspector
    from driple.predict.predictor import Predictor
    from driple.predict.registry import load_registry

    source_name = load_registry().get("default")
    shipped = Predictor.load(source_name).inspector
    known = {k: v for k, v in shipped.info.get("training", {}).items()
             if k in TrainOptions.__dataclass_fields__}
    options = TrainOptions(**{**known, **_overrides(args)})
    base = shipped.model.config()
    builder = shipped.info.get("builder", {})
    rows = (_load("design") or {}).get("rows", []) if args.keep else []
    runs = [("grouping", g, base["num_repeats"]) for g in args.groupings]
    runs += [("K", builder.get("grouping", "uniform"), k) for k in args.repeats
             if k != base["num_repeats"]]
    for study, grouping, k in runs:
        ds = _dataset(source_name, {**builder, "grouping": grouping})
        split = random_split(ds, seed=options.seed)
        t0 = time.perf_counter()
        model = train_inspector(ds, split, hidden_channels=base["hidden_channels"], num_repeats=k,
                                graph_attr=bool(base.get("graph_channels")), options=options,
                                progress=not args.quiet)
        test = model.info["scores"]["test"]["mean"]
        nodes = float(np.mean([ds[i].num_nodes for i in range(len(ds))]))
        rows = [r for r in rows if (r["study"], r["grouping"], r["K"]) != (study, grouping, k)]
        rows.append({"study": study, "grouping": grouping, "K": k, "nrmse": test["nrmse"],
                     "mape": test["mape"], "seconds": time.perf_counter() - t0,
                     "mean_nodes": nodes, "n_test": len(split.test)})
        print(f"design {study}: grouping {grouping} K {k}: NRMSE {test['nrmse']:.3f} MAPE "
              f"{test['mape']:.0f}% ({nodes:.0f} nodes per graph, {rows[-1]['seconds']:.0f} s)",
              flush=True)
        _save("design", {"source": source_name, "rows": rows})


# ---------------------------------------------------------------------- report
def _load(section):
    path = os.path.join(OUT, f"{section}.json")
    return json.load(open(path)) if os.path.exists(path) else None


def _f(v, pct=False):
    if v is None:
        return "-"
    return f"{v:.0f}%" if pct else f"{v:.3f}"


def report() -> str:
    from driple.metrics import RESOURCES

    lines = ["# Reproduced results", "",
             "Generated by `python scripts/reproduce.py` from the shipped datasets and inspectors "
             "(CPU-host labels: compute = CPU, memory = RSS; no GPU figures).", ""]
    labels = _load("labels")
    if labels:
        lines += ["## Labels reproduced from the raw series", "", "| dataset | jobs | identical |",
                  "|---|---|---|"]
        lines += [f"| {k} | {v['jobs']} | {v['identical']} |" for k, v in labels["datasets"].items()]
        lines.append("")
    retest = _load("retest")
    if retest:
        lines += [f"## Test-retest ({len(retest['jobs'])} jobs measured twice)", "",
                  "| metric | median relative difference | max | NRMSE between runs |", "|---|---|---|---|"]
        for m, v in retest["metrics"].items():
            lines.append(f"| {m} | {_f(100 * v['median_rel_diff'], True)} | "
                         f"{_f(100 * v['max_rel_diff'], True) if v.get('max_rel_diff') is not None else '-'} "
                         f"| {_f(v['nrmse'])} |")
        lines.append("")
    acc = _load("accuracy")
    if acc:
        lines += ["## Accuracy on held-out jobs", "",
                  "Mean over the 12 metrics. random: the shipped inspector's test jobs; family: "
                  "leave-one-family-out, a model retrained per family (target settings: "
                  "transferred from the source per family), mean over families.", "",
                  "| setting | jobs | split | inspector NRMSE | mean NRMSE | GBR NRMSE | inspector MAPE | mean MAPE | GBR MAPE |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for setting, r in acc["settings"].items():
            for split in ("random", "family"):
                if split not in r:
                    continue
                s = r[split]["scores"]
                lines.append(f"| {setting} | {r['jobs']} | {split} | "
                             + " | ".join(_f(s[m]["mean"]["nrmse"]) for m in ("inspector", "mean", "gbr"))
                             + " | " + " | ".join(_f(s[m]["mean"]["mape"], True) for m in ("inspector", "mean", "gbr"))
                             + " |")
        lines += ["", "Per resource, mean MAPE over its three metrics (inspector, random split) "
                  "beside the paper's mean error on GPU clusters:", "",
                  "| setting | " + " | ".join(RESOURCES) + " |", "|---|" + "---|" * len(RESOURCES)]
        lines.append("| paper (GPU) | " + " | ".join(f"{PAPER_MEAN_ERROR[r]}%" for r in RESOURCES) + " |")
        for setting, r in acc["settings"].items():
            s = r["random"]["scores"]["inspector"]
            cells = []
            for res in RESOURCES:
                vals = [s[f"{res}_{k}"]["mape"] for k in ("burst_amount", "burst_duration", "idle_duration")
                        if s.get(f"{res}_{k}", {}).get("mape") is not None]
                cells.append(_f(float(np.mean(vals)), True) if vals else "-")
            lines.append(f"| {setting} | " + " | ".join(cells) + " |")
        lines.append("")
        metrics = [m for m in next(iter(acc["settings"].values()))["random"]["scores"]["inspector"] if m != "mean"]
        lines += ["Per metric NRMSE, leave-one-family-out (inspector / GBR):", "",
                  "| metric | " + " | ".join(acc["settings"]) + " |", "|---|" + "---|" * len(acc["settings"])]
        for m in metrics:
            cells = []
            for setting, r in acc["settings"].items():
                s = r.get("family", r["random"])["scores"]
                cells.append(f"{_f(s['inspector'][m]['nrmse'])} / {_f(s['gbr'][m]['nrmse'])}")
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        lines.append("")
    tr = _load("transfer")
    if tr:
        lines += [f"## Transfer learning from {tr['source']}", ""]
        for target, r in tr["targets"].items():
            lines += [f"### {target}", "", "| fraction | scheme | train jobs | NRMSE | MAPE | seconds |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {x['fraction']:.0%} | {x['scheme']} | {x['n_train']} | {_f(x['nrmse'])} | "
                      f"{_f(x['mape'], True)} | {x['seconds']:.1f} |" for x in r["rows"]]
            lines += [""] + [f"- {s}" for s in r["summary"]] + [""]
    design = _load("design")
    if design:
        lines += [f"## Design study on {design['source']} (random split)", "",
                  "| study | grouping | K | nodes per graph | NRMSE | MAPE | train s |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['study']} | {r['grouping']} | {r['K']} | {r['mean_nodes']:.0f} | {_f(r['nrmse'])} | "
                  f"{_f(r['mape'], True)} | {r['seconds']:.0f} |" for r in design["rows"]]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated among {', '.join(SECTIONS)} (default all)")
    p.add_argument("--report", action="store_true", help="only merge the section JSON into results.md")
    p.add_argument("--settings", nargs="*", default=None, help="limit accuracy/transfer to these settings")
    p.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--groupings", nargs="+", default=["uniform", "proportional"],
                   help="grouping policies of the design study (default uniform proportional; "
                   "'none' keeps every op as a node: ~6-30x the training cost)")
    p.add_argument("--repeats", type=int, nargs="+", default=[5, 10, 20])
    p.add_argument("--keep", action="store_true",
                   help="design: keep the rows of an earlier run that this run does not redo")
    p.add_argument("--epochs", type=int, default=None,
                   help="epoch bound of every retraining (default: the shipped inspector's)")
    p.add_argument("--patience", type=int, default=None, help="early-stopping patience of retrainings")
    p.add_argument("--target-scaling", default=None, choices=["max", "standard", "log"],
                   help="target scaling of retrainings (default: the shipped inspector's)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--datasets", default=None, help="datasets directory (default: the shipped one)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)

    global DATASETS, OUT
    from driple.predict.registry import models_dir

    DATASETS = os.path.abspath(args.datasets or DATASETS)
    OUT = str(models_dir() / "evaluation")

    import torch

    from driple.errors import DripleError

    torch.set_num_threads(args.threads)
    os.chdir(ROOT)
    try:
        if not args.report:
            for section in [s.strip() for s in args.sections.split(",") if s.strip()]:
                if section not in SECTIONS:
                    raise DripleError(f"unknown section {section!r}; choose among {', '.join(SECTIONS)}")
                globals()[f"section_{section}"](args)
        text = report()
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "results.md"), "w") as f:
            f.write(text + "\n")
        print(text)
    except DripleError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"reproduce: interrupted; finished sections are in {OUT}",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
