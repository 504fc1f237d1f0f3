"""``driple train``, ``driple evaluate``, ``driple finetune``: the inspector's commands.

Thin: parse, call :mod:`driple.inspector`, print. Every command's work is one library call.
"""
from __future__ import annotations

import argparse
import json
import os.path as osp
import sys

from driple.collect.results import CONTENDED_PCT
from driple.errors import DripleError


def _dataset_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--dataset", required=required, metavar="DIR",
                   help="collector dataset directory holding results.csv (e.g. datasets/v2/cpu-ddp-w2-lo)")
    p.add_argument("--rebuild", action="store_true", help="rebuild every graph instead of using the cache")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--build-workers", type=int, default=1, metavar="N",
                   help="processes that build missing graphs in parallel (default 1)")
    p.add_argument("--max-contention", type=float, default=CONTENDED_PCT, metavar="PCT",
                   help="leave out jobs measured while other processes used more than PCT %% of "
                   "the host CPU (column host_other_cpu_pct; default 10; -1 keeps all)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: the inspector's small kernels gain little "
                   "from more, and spinning threads slow everything down on a busy host)")


def _training_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=int, default=300, help="upper bound on epochs (default 300)")
    p.add_argument("--patience", type=int, default=30,
                   help="stop after this many epochs without a better validation loss (default 30)")
    p.add_argument("--batch-size", type=int, default=32, help="graphs per batch (default 32)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    p.add_argument("--weight-decay", type=float, default=1e-6, help="Adam weight decay (default 1e-6)")
    p.add_argument("--target-scaling", default=None, choices=["max", "standard", "log", "ln"],
                   help="per-metric target scaling: divide by the training max (paper), z-score, "
                   "z-score of log1p, or z-score of ln(y + eps) (default: max for --model gnn, ln "
                   "otherwise; residuals over priors need ln)")
    p.add_argument("--ema", type=float, default=None, metavar="DECAY",
                   help="keep an exponential moving average of the weights (decay per optimizer "
                   "step, in [0, 1); 0: off) and validate and keep the average, not the weights "
                   "(default: 0.995 for --model hybrid, chosen on held-back jobs; 0 otherwise)")
    p.add_argument("--networks", type=int, default=None, metavar="N",
                   help="train N networks alone (seeds --seed, --seed + 1, ...) and average them "
                   "(default: the --model's preset, chosen on held-back jobs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, initialisation and shuffling")


def _overwrite_arg(p: argparse.ArgumentParser) -> None:
    from driple.shipped import OVERWRITE_FLAG

    p.add_argument(OVERWRITE_FLAG, action="store_true",
                   help="allow --out inside the shipped inspectors (trained_models/, a registry "
                   "directory) or the shipped datasets; refused otherwise")


def register(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train", help="train an inspector on a measured dataset",
        description="Train an inspector (GCN + repeated GCN/GRU + Set2Set + MLP) on the jobs of one "
        "collector dataset and save it with its scalers, split and test scores. The defaults are "
        "those of the shipped source inspector (its MODEL_CARD.md): the hybrid network (graph "
        "embedding + graph-level features + physical priors, residuals in log space; two such "
        "networks, each trained alone, averaged: --networks; it tied with the features-only MLP on "
        "the source's validation jobs and was chosen by a leave-family-out on the training jobs), "
        "K=10, up to 300 epochs with patience 30, with the per-op-class roofline joined into the "
        "durations (--no-roofline: the network alone; --trees: also averaged with gradient-boosted "
        "trees; --model features: the MLP without the graph; --model gnn: the paper's network).",
        epilog="example:\n  driple train --dataset datasets/v2/cpu-ddp-w2-lo --out my-models/cpu-ddp-w2-lo",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _dataset_args(train)
    train.add_argument("--out", required=True, metavar="DIR",
                       help="directory for the checkpoint (inspector.pt and scores.json); a new "
                       "one, not a shipped inspector's")
    _overwrite_arg(train)
    train.add_argument("--split", default="random", choices=["random", "family"],
                       help="random: whole architectures (model + knobs) to train / validation / "
                       "calibration / test, 50/15/15/20; family: hold out every job of --family "
                       "(default random)")
    train.add_argument("--family", help="model family to hold out with --split family")
    train.add_argument("--groups", type=int, default=100, help="groups per graph M (default 100)")
    train.add_argument("--grouping", default="uniform", choices=["uniform", "proportional", "none"],
                       help="grouping policy of the graph builder (default uniform)")
    train.add_argument("--features", default="driple", choices=["driple", "rich"],
                       help="per-group feature set (default driple: op frequency, tensor MB, ops)")
    train.add_argument("--hidden", type=int, default=64, help="hidden channels (default 64)")
    train.add_argument("--repeats", type=int, default=10,
                       help="repetitions K of the shared GCN layer (default 10, see the design study)")
    train.add_argument("--dropout", type=float, default=0.0, help="dropout in the MLP head (default 0)")
    train.add_argument("--graph-attr", action=argparse.BooleanOptionalAction, default=True,
                       help="--model gnn: also feed the 6 legacy graph-level attributes (params, "
                       "GFLOPs, activation MB, comm MB, batch size, ops; log-scaled) to the MLP head "
                       "(not in the paper; the shipped v1 source inspector has them)")
    train.add_argument("--model", dest="configuration", default="hybrid", choices=["gnn", "hybrid", "features"],
                       help="gnn: the paper's graph network; hybrid: its graph embedding joined with "
                       "graph-level features and physical priors (FLOPs, bytes, communication, "
                       "against the host's measured speed); features: those alone in an MLP "
                       "(default hybrid, as shipped)")
    train.add_argument("--trees", action=argparse.BooleanOptionalAction, default=False,
                       help="average the network (geometric mean) with gradient-boosted trees on "
                       "its graph-level inputs and priors, fitted on the same training jobs and "
                       "stored in the checkpoint without pickle (default off: the shipped source "
                       "chose the roofline without trees on validation)")
    train.add_argument("--roofline", action=argparse.BooleanOptionalAction, default=True,
                       help="join the per-op-class roofline (one fitted rate per op class, "
                       "driple.inspector.roofline) into the duration targets: per target the "
                       "network's, the roofline's or their mean, chosen on the validation jobs "
                       "(default on, as shipped)")
    train.add_argument("--residual", action=argparse.BooleanOptionalAction, default=None,
                       help="predict each target as its physical prior times a learned factor "
                       "(default: on for hybrid and features, off for gnn)")
    _training_args(train)
    train.set_defaults(func=run_train)

    ev = sub.add_parser(
        "evaluate", help="score an inspector against baselines on a dataset",
        description="Per-target NRMSE (RMSE / mean measured) and MAPE on test jobs of the inspector "
        "next to baselines (training mean, gradient boosting on log targets, nearest training "
        "architecture), all fitted on the same split in this run, with the noise floor of each "
        "label (from <dataset>-retest) beside them. Splits group jobs by architecture (model + "
        "knobs) into train / validation / calibration / test. --split random scores the inspector "
        "as trained on its own test jobs; --split family retrains it once per held-out family "
        "(a transferred inspector: fine-tuned again from its source; --retrain-source also "
        "retrains the source without the family, the honest and costly way).",
        epilog="examples:\n"
        "  driple evaluate trained_models/cpu-ddp-w2-lo --split family --family vgg\n"
        "  driple evaluate trained_models/cpu-ddp-w2-1g --split family --retrain-source\n"
        "  driple evaluate trained_models/cpu-ddp-w2-lo --external datasets/out-of-zoo",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("checkpoint", help="trained model directory or .pt file")
    _dataset_args(ev, required=False)
    ev.add_argument("--split", default="random", choices=["random", "family"],
                    help="random: the checkpoint's test jobs; family: leave-one-family-out (retrains)")
    ev.add_argument("--family", action="append", metavar="NAME",
                    help="with --split family: hold out only this family (repeatable; default all)")
    ev.add_argument("--external", metavar="DIR",
                    help="score on every job of this other dataset of the same setting instead (e.g. "
                    "datasets/out-of-zoo: architectures never trained on), the inspector as trained "
                    "and the baselines fitted on its own training jobs")
    ev.add_argument("--estimators", "--baselines", dest="estimators", default="mean,hgb,knn",
                    metavar="LIST",
                    help="comma-separated estimators beside the inspector: mean, hgb, hgb-priors (boosting "
                    "on the hybrid's graph-level features and priors), knn, analytic "
                    "(roofline step time, one calibrated factor; scores step_time only, labels v2), "
                    "roofline (one rate per op class: durations and step time), roofline-overlap "
                    "(the same with communication partly hidden under compute), roofline-physical (its rates on "
                    "FLOPs of convolutions, matmuls, attention and recurrent layers and on traffic of the "
                    "rest), gnn (the paper's graph network, trained per fold), hybrid, features, or a "
                    "registered one (default mean,hgb,knn)")
    ev.add_argument("--no-inspector", action="store_true",
                    help="score only the --estimators, on the folds the inspector would get (its split, "
                    "seed and options): no retraining, seconds for table models and rooflines")
    ev.add_argument("--source", metavar="CKPT",
                    help="source inspector of a transferred checkpoint (default: the registry's "
                    "inspector of the setting it was transferred from)")
    ev.add_argument("--source-dataset", metavar="DIR",
                    help="the source's dataset, for --retrain-source (default: the one the source "
                    "checkpoint records)")
    ev.add_argument("--retrain-source", action="store_true",
                    help="transferred checkpoint: retrain the source per fold without the held-out "
                    "family (random split: without the test architectures); one source training per "
                    "fold. Without it the fold is labelled 'family seen in source'")
    ev.add_argument("--retrain", action="store_true",
                    help="--split random: train the checkpoint's configuration again on a fresh "
                    "split (seeded) instead of scoring it as trained")
    ev.add_argument("--retest", metavar="DIR",
                    help="retest dataset for the noise floor (default: <dataset>-retest if it exists)")
    ev.add_argument("--no-floor", action="store_true", help="no noise floor")
    ev.add_argument("--epochs", type=int, default=None,
                    help="upper bound on epochs of every retraining (default: the checkpoint's)")
    ev.add_argument("--patience", type=int, default=None,
                    help="early-stopping patience of every retraining (default: the checkpoint's)")
    ev.add_argument("--seed", type=int, default=None, help="seed (default: the checkpoint's)")
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
    ev.add_argument("--plot", metavar="PNG", help="save predicted-vs-measured scatter plots here")
    ev.set_defaults(func=run_evaluate)

    ft = sub.add_parser(
        "finetune", help="transfer an inspector to a new setting with little data",
        description="Fine-tune an inspector trained in one setting on a fraction of another "
        "setting's jobs. Schemes: paper (second half of the repeated layer + MLP), mlp (MLP only, "
        "as Driple's public code), scratch (fresh model, for comparison).")
    ft.add_argument("--from", dest="source", required=True, metavar="DIR",
                    help="trained model directory or .pt file of the source setting")
    _dataset_args(ft)
    ft.add_argument("--out", metavar="DIR", required=True,
                    help="directory for the fine-tuned checkpoint (a new one, not a shipped inspector's)")
    _overwrite_arg(ft)
    ft.add_argument("--fraction", type=float, default=0.4,
                    help="share of the target's training jobs to use, in (0, 1] (default 0.4)")
    ft.add_argument("--scheme", default=None, choices=["paper", "mlp", "scratch"],
                    help="what to train: paper (first half of the shared layer's repetitions "
                    "frozen), mlp (only the MLP head; all of a features-only inspector), scratch "
                    "(default: paper, or mlp for a features-only source, which has no graph layers)")
    ft.add_argument("--epochs", type=int, default=None, help="upper bound on epochs (default: source's)")
    ft.add_argument("--patience", type=int, default=None, help="early-stopping patience (default: source's)")
    ft.add_argument("--lr", type=float, default=None, help="learning rate (default: source's)")
    ft.add_argument("--seed", type=int, default=None, help="seed (default: source's)")
    ft.add_argument("--json", action="store_true", help="print the result as JSON")
    ft.set_defaults(func=run_finetune)


def _load_dataset(args, groups=None, grouping=None, features=None, seed=None):
    import torch

    from driple.graph.grouping import DEFAULT_SEED
    from driple.inspector.dataset import InspectorDataset

    if args.threads < 1:
        raise DripleError("--threads must be at least 1")
    torch.set_num_threads(args.threads)

    if not osp.isdir(args.dataset):
        raise DripleError(f"{args.dataset} is not a directory; pass a collector dataset dir "
                          "such as datasets/v2/cpu-ddp-w2-lo")
    return InspectorDataset(args.dataset, groups=groups or 100, grouping=grouping or "uniform",
                            features=features or "driple", force_reload=args.rebuild,
                            seed=DEFAULT_SEED if seed is None else seed,
                            progress=not args.quiet, workers=args.build_workers,
                            max_contention=None if args.max_contention < 0 else args.max_contention)


def _print_scores(title: str, table: dict, out=None) -> None:
    from driple.metrics import target_names

    out = out or sys.stdout

    print(title, file=out)
    for metric in (*target_names(), "mean"):
        e = table[metric]
        nrmse = "-" if e["nrmse"] is None else f"{e['nrmse']:.3f}"
        mape = "-" if e["mape"] is None else f"{e['mape']:.1f}%"
        print(f"  {metric:28s} NRMSE {nrmse:>7s}   MAPE {mape:>7s}", file=out)


def training_choices(args: argparse.Namespace) -> tuple:
    """``(InspectorConfig, TrainOptions)`` that ``driple train`` options ask for: the paper's
    GNN scales targets by their maximum unless told otherwise; the hybrid and features-only
    networks predict residuals over the priors, in log space."""
    from driple.inspector.train import InspectorConfig, TrainOptions, preset

    if args.repeats < 1:
        raise DripleError(f"--repeats must be at least 1, not {args.repeats}")
    gnn = args.configuration == "gnn"
    residual = (not gnn) if args.residual is None else args.residual
    scaling = args.target_scaling or ("ln" if residual or not gnn else "max")
    defaults = preset(args.configuration)
    ema = defaults[1].ema if args.ema is None else args.ema  # the preset's average
    networks = defaults[0].networks if args.networks is None else args.networks
    options = TrainOptions(lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
                           patience=args.patience, batch_size=args.batch_size,
                           target_scaling=scaling, seed=args.seed, ema=ema)
    config = InspectorConfig(kind=args.configuration, hidden_channels=args.hidden,
                             num_repeats=args.repeats, dropout=args.dropout, residual=residual,
                             graph_attr=bool(args.graph_attr and gnn), networks=networks)
    return config, options


def run_train(args: argparse.Namespace) -> int:
    from driple.inspector.splits import make_split
    from driple.inspector.train import train_inspector
    from driple.shipped import refuse_shipped

    refuse_shipped(args.out, args.overwrite_shipped)
    dataset = _load_dataset(args, args.groups, args.grouping, args.features)
    split = make_split(dataset, args.split, seed=args.seed, family=args.family)
    config, options = training_choices(args)
    print(f"{dataset}: train {len(split.train)}, val {len(split.val)}, calibration "
          f"{len(split.calibration)}, test {len(split.test)} jobs", file=sys.stderr)
    predictor = train_inspector(dataset[split.train], dataset[split.val] if split.val else None,
                                options, config, test=dataset[split.test] if split.test else None,
                                progress=not args.quiet)
    if args.trees:
        from driple.inspector.ensemble import with_trees

        predictor = with_trees(predictor, dataset, split, random_state=args.seed)
    if args.roofline:
        from driple.inspector.ensemble import with_roofline

        predictor = with_roofline(predictor, dataset, split)
    predictor.info["split"] = split.to_dict(dataset)
    path = predictor.save(args.out)
    scores_path = osp.join(osp.dirname(path), "scores.json")
    with open(scores_path, "w") as f:
        json.dump({"setting": predictor.setting, "split": split.kind, "scores": predictor.info["scores"],
                   "history": {k: v for k, v in predictor.info["history"].items()
                               if k not in ("train_loss", "val_loss")}}, f, indent=2)
    h = predictor.info["history"]
    print(f"trained {h['epochs']} epochs in {h['seconds']:.0f} s (best epoch {h['best_epoch']}); "
          f"saved {path}")
    if "test" in predictor.info["scores"]:
        _print_scores(f"test jobs ({len(split.test)}):", predictor.info["scores"]["test"])
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.estimator_registry import estimator_names
    from driple.inspector.evaluate import evaluate, format_report, plot_predictions, to_json
    from driple.inspector.noise import noise_floor, retest_dir

    predictor = load_inspector(args.checkpoint)
    builder = predictor.build_options()  # as recorded; what is not, as when it was trained
    if not args.dataset:
        args.dataset = predictor.info.get("dataset")
        if not args.dataset:
            raise DripleError("pass --dataset DIR (the checkpoint does not record its dataset)")
    estimators = [b.strip() for b in args.estimators.split(",") if b.strip()]
    unknown = [b for b in estimators if b not in estimator_names()]
    if unknown:
        raise DripleError(f"unknown estimator(s) {', '.join(unknown)}; choose among "
                          f"{', '.join(estimator_names())}")
    dataset = _load_dataset(args, builder["groups"], builder["grouping"], builder["features"], builder["seed"])
    external = None
    if args.external:
        if args.split != "random" or args.retrain or args.retrain_source:
            raise DripleError("--external scores the inspector as trained: drop --split family, "
                              "--retrain and --retrain-source")
        external = _load_dataset(argparse.Namespace(**{**vars(args), "dataset": args.external}),
                                 builder["groups"], builder["grouping"], builder["features"], builder["seed"])
    if args.no_inspector and not estimators:
        raise DripleError("--no-inspector needs --estimators (what to score instead)")
    if args.no_inspector and (args.retrain or args.retrain_source or args.source or args.source_dataset):
        raise DripleError("--no-inspector retrains nothing: drop --retrain, --retrain-source, --source "
                          "and --source-dataset")
    source, source_dataset = (None, None) if args.no_inspector else _transfer_source(args, predictor)
    floor = None
    retest = args.retest or (None if args.no_floor else retest_dir(args.dataset))
    if retest and not args.no_floor:
        floor = noise_floor(args.dataset, retest, dataset.target_names,
                            None if args.max_contention < 0 else args.max_contention)
    overrides = {k: v for k, v in (("epochs", args.epochs), ("patience", args.patience)) if v is not None}
    report = evaluate(predictor, dataset, split=args.split, baselines=estimators, seed=args.seed,
                      progress=not args.quiet, families=args.family, overrides=overrides,
                      source=source, source_dataset=source_dataset,
                      retrain_source=args.retrain_source, floor=floor, retrain=args.retrain,
                      external=external, with_inspector=not args.no_inspector)
    if args.plot:
        plot_predictions(report, args.plot)
    if args.json:
        json.dump(to_json(report), sys.stdout, indent=2)
        print()
    else:
        print(format_report(report))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0


def _transfer_source(args, predictor):
    """``(source inspector, source dataset or None)`` of a transferred checkpoint; ``(None,
    None)`` for one trained from scratch or when no split needs the source."""
    from driple.inspector.checkpoint import load_inspector

    transfer = predictor.info.get("transfer")
    if not transfer:
        if args.retrain_source or args.source or args.source_dataset:
            raise DripleError("--source, --source-dataset and --retrain-source are for a transferred "
                              "inspector; this one was trained from scratch")
        return None, None
    if args.split != "family" and not (args.retrain or args.retrain_source):
        return None, None
    if args.source:
        source = load_inspector(args.source)
    else:
        from driple.predict.registry import resolve

        path, _ = resolve(transfer.get("from_setting"))
        source = load_inspector(str(path))
    if not args.retrain_source:
        return source, None
    root = args.source_dataset or source.info.get("dataset")
    if not root or not osp.isdir(root):
        raise DripleError(f"the source's dataset {root!r} is not a directory; pass --source-dataset DIR")
    builder = source.build_options()
    src_args = argparse.Namespace(**{**vars(args), "dataset": root})
    return source, _load_dataset(src_args, builder["groups"], builder["grouping"], builder["features"],
                                 builder["seed"])


def run_finetune(args: argparse.Namespace) -> int:
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.transfer import default_scheme, finetune, finetune_options
    from driple.shipped import refuse_shipped

    refuse_shipped(args.out, args.overwrite_shipped)
    source = load_inspector(args.source)
    builder = source.build_options()
    dataset = _load_dataset(args, builder["groups"], builder["grouping"], builder["features"], builder["seed"])
    overrides = {k: v for k, v in (("epochs", args.epochs), ("patience", args.patience),
                                   ("lr", args.lr), ("seed", args.seed)) if v is not None}
    options = finetune_options(source, overrides)
    scheme = args.scheme or default_scheme(source)
    predictor = finetune(source, dataset, fraction=args.fraction, scheme=scheme,
                         options=options, progress=not args.quiet)
    if source.trees is not None:  # an ensemble source: trees of its own for the target setting
        from driple.inspector.ensemble import with_trees
        from driple.inspector.splits import Split

        predictor = with_trees(predictor, dataset, Split.from_dict(predictor.info["split"], dataset),
                               random_state=options.seed)
    if source.roofline is not None:  # the target setting's own rates
        from driple.inspector.ensemble import with_roofline
        from driple.inspector.splits import Split

        predictor = with_roofline(predictor, dataset, Split.from_dict(predictor.info["split"], dataset))
    path = predictor.save(args.out)
    t = predictor.info["transfer"]
    if args.json:
        json.dump({"transfer": t, "scores": predictor.info["scores"], "saved": path}, sys.stdout, indent=2)
        print()
        return 0
    print(f"fine-tuned {t['from_setting']} -> {predictor.setting} ({t['scheme']}, "
          f"{t['n_train']} training jobs = {t['fraction']:.0%}, {t['trainable_parameters']} "
          f"trainable parameters) in {t['seconds']:.1f} s; saved {path}")
    if "test" in predictor.info["scores"]:
        _print_scores("target test jobs:", predictor.info["scores"]["test"])
    return 0
