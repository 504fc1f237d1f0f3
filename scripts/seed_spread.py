#!/usr/bin/env python
"""How much of a held-out-family figure is the network's seed? The shipped configuration
retrained per fold with several seeds, each seed alone and their ensemble, beside hgb-priors.

    python scripts/seed_spread.py                                  # source, seeds 0 1 2, every family
    python scripts/seed_spread.py --families resnet vgg --seeds 0 1   # a smoke run

The folds are ``driple evaluate --split family``'s (seed 0: the same validation and calibration
jobs in every fold); seed ``s`` changes only the network's initialisation and shuffling, and each
seed is one network (a checkpoint averaging several is retrained one network per seed). Each
seed's network gets the checkpoint's roofline joined as ``evaluate`` does (modes chosen on the
fold's validation jobs); the ensemble is the geometric mean of the seeds' networks, joined the
same way. Prints, per estimator, the median and mean per-target MAPE over all held-out jobs, the
step time's MAPE, and how much lower the median is than ``hgb-priors``' of the same folds.
~1.5 minutes per network and fold on one core: the 11 source families x 3 seeds take ~50 min.
These are test folds: a figure to read, not to choose with.
"""
from __future__ import annotations

import argparse
import json
import sys


def run(inspector, dataset, seeds, families=None) -> dict:
    from dataclasses import replace

    import numpy as np

    from driple.inspector.estimator_registry import make_estimator
    from driple.inspector.estimators import EnsembleEstimator, GNNEstimator
    from driple.inspector.evaluate import run_folds
    from driple.inspector.roofline_estimator import WithRoofline
    from driple.inspector.splits import make_splits
    from driple.inspector.train import recorded_options

    from driple.inspector.train import retrain_config

    options, host, cache = recorded_options(inspector), inspector.roofline.host, {}
    one = replace(retrain_config(inspector)[0], networks=1)  # a seed's column is one network

    def network(seed):
        return GNNEstimator(options=replace(options, seed=seed), config=one, host=host, cache=cache,
                            name=f"seed {seed}")

    factories = {f"seed {s}": (lambda fold, s=s: WithRoofline(network(s), host=host, name=f"seed {s}"))
                 for s in seeds}
    if len(seeds) > 1:
        factories[f"ensemble of {len(seeds)}"] = lambda fold: WithRoofline(
            EnsembleEstimator([network(s) for s in seeds], name="ensemble"), host=host, name="ensemble")
    factories["hgb-priors"] = lambda fold: make_estimator("hgb-priors", seed=0)  # as evaluate's column
    folds = [f for f in make_splits(dataset, "family", 0) if families is None or f.held_out in families]
    report = run_folds(dataset, folds, factories, progress=True)
    measured = np.concatenate([f["measured"] for f in report["folds"]])
    out = {}
    for name in factories:
        predicted = np.concatenate([f["predictions"][name] for f in report["folds"]])
        mape = {}
        for j, target in enumerate(dataset.target_names):
            ok = np.isfinite(measured[:, j]) & (measured[:, j] > 0) & np.isfinite(predicted[:, j])
            if ok.any():
                mape[target] = float(np.mean(np.abs(predicted[ok, j] - measured[ok, j]) / measured[ok, j]) * 100)
        out[name] = {"median": float(np.median(list(mape.values()))), "mean": float(np.mean(list(mape.values()))),
                     "step_time": mape.get("step_time"), "per_target": mape}
    table = out["hgb-priors"]["median"]
    for r in out.values():
        r["lower_than_hgb_priors"] = 1 - r["median"] / table
    return {"folds": [f.held_out for f in folds], "jobs": int(len(measured)), "estimators": out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inspector", default="trained_models/cpu-ddp-w2-lo",
                   help="checkpoint (directory) whose configuration is retrained (default %(default)s)")
    p.add_argument("--dataset", default="datasets/v2/cpu-ddp-w2-lo", help="its dataset (default %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--families", nargs="*", default=None, help="hold out only these families")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args(argv)

    import torch

    from driple.errors import DripleError
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.dataset import dataset_built_as

    torch.set_num_threads(args.threads)
    try:
        inspector = load_inspector(args.inspector)
        if inspector.roofline is None:
            raise DripleError(f"{args.inspector} has no roofline member: this study joins one per seed")
        dataset = dataset_built_as(inspector, args.dataset)
        result = run(inspector, dataset, args.seeds, set(args.families) if args.families else None)
    except DripleError as err:
        print(f"seed_spread: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seed_spread: interrupted", file=sys.stderr)
        return 130
    print(f"{result['jobs']} held-out jobs in {len(result['folds'])} family folds")
    for name, r in result["estimators"].items():
        print(f"  {name:15s} median {r['median']:5.1f} %  mean {r['mean']:5.1f} %  step time "
              f"{r['step_time']:5.1f} %  median {r['lower_than_hgb_priors']:.0%} lower than hgb-priors")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python scripts/seed_spread.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                       **result}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
