#!/usr/bin/env python
"""Choose how many networks the hybrid averages (``InspectorConfig.networks``) on jobs no
training decision has seen: the calibration jobs of the source's random split.

    python scripts/choose_networks.py                         # source dataset, seeds 0-5, up to 3 networks
    python scripts/choose_networks.py --seeds 0 1 2 3 --max-networks 2 --json networks.json

Trains the hybrid preset once per seed (each network alone, early stopping on the validation
jobs), then scores every run of ``k`` consecutive seeds (``k = 1 .. --max-networks``; seeds
wrap around) as an ensemble with the roofline joined as shipping does (modes chosen on the
validation jobs), on the calibration jobs: median and mean per-target MAPE, mean NRMSE,
step-time MAPE. Prints, per ``k``, the mean over its runs and the spread between them (what
one draw of seeds can cost). The test jobs are not looked at. ~1 minute per seed on one core.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def train_seeds(dataset, split, seeds, progress=False) -> list:
    """One hybrid network per seed on the split's training jobs."""
    from dataclasses import replace

    from driple.inspector.train import preset, train_inspector

    config, options = preset("hybrid")
    config = replace(config, networks=1)
    out = []
    for seed in seeds:
        t0 = time.perf_counter()
        out.append(train_inspector(dataset[list(split.train)], dataset[list(split.val)],
                                   replace(options, seed=seed), config, progress=progress))
        print(f"seed {seed}: best epoch {out[-1].info['history']['best_epoch']} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def ensemble_of(singles):
    """The singles' networks as one inspector (they share the split, hence their scalers)."""
    from driple.inspector.checkpoint import TrainedInspector
    from driple.inspector.model import NetworkEnsemble

    if len(singles) == 1:
        return singles[0]
    first = singles[0]
    return TrainedInspector(NetworkEnsemble([s.model for s in singles]), first.feature_scaler,
                            first.target_scaler, first.info, targets=first.targets,
                            graph_inputs=first.graph_inputs, target_priors=first.target_priors)


def score(inspector, dataset, split, jobs) -> dict:
    """``inspector`` with the roofline joined as shipping does, summarised on ``jobs``."""
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.scores import table_summary
    from driple.inspector.train import score_jobs

    return table_summary(score_jobs(with_roofline(inspector, dataset, split), jobs))


def run(dataset, seeds, max_networks) -> dict:
    import numpy as np

    from driple.inspector.splits import random_split

    split = random_split(dataset, seed=0)
    calibration = [dataset[i] for i in split.calibration]
    singles = train_seeds(dataset, split, seeds)
    runs, summary = [], []
    for k in range(1, max_networks + 1):
        mine = []
        for start in range(len(seeds)):
            members = [(start + j) % len(seeds) for j in range(k)]
            mine.append({"networks": k, "seeds": [seeds[i] for i in members],
                         **score(ensemble_of([singles[i] for i in members]), dataset, split, calibration)})
            if k == len(seeds):
                break  # every start gives the same ensemble
        runs += mine
        s = {"networks": k, "runs": len(mine)}
        for key in ("mape_median", "mape_mean", "nrmse_mean", "step_time_mape"):
            values = [r[key] for r in mine if r[key] is not None]
            s[key], s[key + "_range"] = float(np.mean(values)), [float(min(values)), float(max(values))]
        summary.append(s)
    return {"calibration_jobs": len(calibration), "runs": runs, "summary": summary}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="datasets/v2/cpu-ddp-w2-lo", help="source dataset (default %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    p.add_argument("--max-networks", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None, metavar="FILE", help="also write every run and the summary here")
    args = p.parse_args(argv)
    if not 1 <= args.max_networks <= len(args.seeds):
        p.error(f"--max-networks must be between 1 and the number of seeds ({len(args.seeds)})")

    import torch

    from driple.errors import DripleError
    from driple.inspector.dataset import InspectorDataset

    torch.set_num_threads(args.threads)
    try:
        result = run(InspectorDataset(args.dataset, progress=False), args.seeds, args.max_networks)
    except DripleError as err:
        print(f"choose_networks: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("choose_networks: interrupted", file=sys.stderr)
        return 130
    print(f"\n{result['calibration_jobs']} calibration jobs; mean over runs [lowest, highest]:")
    for s in result["summary"]:
        print(f"  {s['networks']} network(s), {s['runs']} runs: MAPE median {s['mape_median']:5.1f} % "
              f"[{s['mape_median_range'][0]:.1f}, {s['mape_median_range'][1]:.1f}]  mean {s['mape_mean']:5.1f} %  "
              f"NRMSE {s['nrmse_mean']:.3f} [{s['nrmse_mean_range'][0]:.3f}, {s['nrmse_mean_range'][1]:.3f}]  "
              f"step {s['step_time_mape']:5.1f} %")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dataset": args.dataset,
                       "command": "python scripts/choose_networks.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                       **result}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
