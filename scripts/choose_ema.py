#!/usr/bin/env python
"""Choose the decay of the weights' moving average (``TrainOptions.ema``) on jobs no training
decision has seen: the calibration jobs of the source's random split.

    python scripts/choose_ema.py                                   # source dataset, 0/0.98/0.99/0.995, 3 seeds
    python scripts/choose_ema.py --decays 0 0.995 --seeds 0 1 --json ema.json

For each decay and seed this trains one hybrid network (the ``hybrid`` preset of
:func:`driple.inspector.train.preset` with ``networks=1``, as when the decay was chosen; the
preset averages two), early stopping on the validation jobs, joins the
per-op-class roofline as shipping does (modes chosen on the validation jobs), and scores the
calibration jobs: mean and median per-target MAPE, mean NRMSE, step-time MAPE. The validation
jobs stopped the training, so their scores favour whichever run was luckier there; the
calibration jobs did not. The test jobs are not looked at. ~1 minute per training on one core.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def run(dataset, decays, seeds, progress=False) -> list[dict]:
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.scores import table_summary
    from driple.inspector.splits import random_split
    from driple.inspector.train import preset, score_jobs, train_inspector

    split = random_split(dataset, seed=0)
    calibration = [dataset[i] for i in split.calibration]
    rows = []
    for decay in decays:
        for seed in seeds:
            t0 = time.perf_counter()
            config, options = preset("hybrid", seed=seed, ema=decay, networks=1)  # as chosen: one network
            model = train_inspector(dataset[list(split.train)], dataset[list(split.val)], options, config,
                                    progress=progress)
            model = with_roofline(model, dataset, split)
            rows.append({"decay": decay, "seed": seed, "best_epoch": model.info["history"]["best_epoch"],
                         **table_summary(score_jobs(model, calibration)), "seconds": time.perf_counter() - t0})
            r = rows[-1]
            print(f"decay {decay:<6g} seed {seed}: MAPE mean {r['mape_mean']:5.1f} %  median "
                  f"{r['mape_median']:5.1f} %  NRMSE {r['nrmse_mean']:.3f}  step {r['step_time_mape'] or float('nan'):5.1f} %"
                  f"  (best epoch {r['best_epoch']}, {r['seconds']:.0f} s)", flush=True)
    return rows


def summary(rows) -> list[dict]:
    import numpy as np

    out = []
    for decay in sorted({r["decay"] for r in rows}):
        mine = [r for r in rows if r["decay"] == decay]
        out.append({"decay": decay, "runs": len(mine),
                    **{k: float(np.mean([r[k] for r in mine]))
                       for k in ("mape_mean", "mape_median", "nrmse_mean")}})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="datasets/v2/cpu-ddp-w2-lo", help="source dataset (default %(default)s)")
    p.add_argument("--decays", type=float, nargs="+", default=[0.0, 0.98, 0.99, 0.995])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None, metavar="FILE", help="also write every run and the summary here")
    args = p.parse_args(argv)

    import torch

    from driple.errors import DripleError
    from driple.inspector.dataset import InspectorDataset

    torch.set_num_threads(args.threads)
    try:
        dataset = InspectorDataset(args.dataset, progress=False)
        rows = run(dataset, args.decays, args.seeds)
    except DripleError as err:
        print(f"choose_ema: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("choose_ema: interrupted", file=sys.stderr)
        return 130
    print("\nmean over seeds (calibration jobs):")
    for s in summary(rows):
        print(f"  decay {s['decay']:<6g} MAPE mean {s['mape_mean']:5.1f} %  median {s['mape_median']:5.1f} %  "
              f"NRMSE {s['nrmse_mean']:.3f}  ({s['runs']} runs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dataset": args.dataset, "command": "python scripts/choose_ema.py " + " ".join(argv or sys.argv[1:]),
                       "runs": rows, "summary": summary(rows)}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
