"""How much target data and time transfer learning saves: fine-tuning vs training from scratch.

    python scripts/transfer_study.py --from trained_models/cpu-ddp-w2-lo --dataset datasets/v2/cpu-ddp-w2-1g
    python scripts/transfer_study.py --from trained_models/S --dataset datasets/T \\
        --fractions 0.1 0.2 0.4 0.6 0.8 1.0 --schemes paper mlp scratch --json study.json
    python scripts/transfer_study.py --from trained_models/cpu-ddp-w2-lo --dataset datasets/v2/cpu-fsdp-w2-1g \
        --fractions 0.2 0.4 0.6 1.0 --schemes paper scratch --seeds 0 1 2 3 4   # means over five seeds

For each fraction of the target's training (and validation) jobs and each scheme (paper: second
half of φr + MLP; mlp: MLP only; scratch: a fresh inspector) this fine-tunes on the same seeded
split of the target dataset and prints the mean NRMSE / MAPE over the 13 targets (12 burst/idle
metrics and the step time) on the target's test jobs and the wall time of training. The summary names, per scheme, the least fraction
whose NRMSE is within ``--tolerance`` of scratch on all the data, and the speed-up in time.
With ``--seeds`` every run repeats per seed (which training jobs a fraction keeps, the
training's start; the test jobs stay) and the summary compares the means; where the source has
a roofline each fine-tuned network is scored joined to a roofline fitted on the same jobs, as a
shipped inspector is (``--no-roofline``: the networks alone).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

from driple.collect.provenance import script_stamp
from driple.errors import DripleError
from driple.evaluation.transfer import mean_rows, run_study, summarize
from driple.inspector.checkpoint import load_inspector
from driple.inspector.dataset import InspectorDataset
from driple.inspector.transfer import SCHEMES, finetune_options


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", required=True, help="source trained model directory")
    parser.add_argument("--dataset", required=True, help="target collector dataset directory")
    parser.add_argument("--fractions", type=float, nargs="+",
                        default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    parser.add_argument("--epochs", type=int, default=None, help="upper bound (default: source's)")
    parser.add_argument("--patience", type=int, default=None, help="default: source's")
    parser.add_argument("--seed", type=int, default=0, help="the target's split (its test jobs)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, metavar="SEED",
                        help="repeat every run with these seeds (which training jobs a fraction keeps, "
                             "the training's start); the summary compares means (default: --seed alone)")
    parser.add_argument("--roofline", action=argparse.BooleanOptionalAction, default=None,
                        help="join a roofline fitted on the same jobs to every fine-tuned network, as a "
                             "shipped inspector joins it, and score that (default: when the source has one)")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="'as good as' = NRMSE within this share of the reference (default 0.05)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    bad = [f for f in args.fractions if not 0 < f <= 1]
    if bad:
        parser.error(f"--fractions are shares of the target's training jobs, in (0, 1]: not {bad[0]:g}")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        parser.error(f"--json {args.json}: no such directory (checked before the runs, not after)")
    try:
        return study(args, argv)
    except DripleError as err:
        print(f"transfer_study: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("transfer_study: interrupted; nothing written", file=sys.stderr)
        return 130


def study(args, argv) -> int:
    """Load the source and the target's dataset, run every fraction, scheme and seed, print the
    table and the summary, and write ``--json``."""
    torch.set_num_threads(args.threads)
    source = load_inspector(args.source)
    builder = source.info.get("builder", {})
    dataset = InspectorDataset(args.dataset, groups=builder.get("groups", 100),
                               grouping=builder.get("grouping", "uniform"),
                               features=builder.get("features", "driple"), progress=not args.quiet)
    overrides = {k: v for k, v in (("epochs", args.epochs), ("patience", args.patience)) if v is not None}
    options = finetune_options(source, {**overrides, "seed": args.seed})
    print(f"transfer {source.setting} -> {dataset.setting}: {dataset}")
    roofline = source.roofline is not None if args.roofline is None else args.roofline
    if roofline:
        print("scored: each network joined to a roofline fitted on the same jobs (--no-roofline: the networks alone)")
    print(f"{'seed':>4s} {'fraction':>8s} {'scheme':8s} {'jobs':>6s} {'NRMSE':>8s} {'MAPE%':>8s} {'step%':>8s} "
          f"{'train s':>9s} {'epochs':>7s}")
    rows = run_study(source, dataset, sorted(args.fractions), args.schemes, options,
                     progress=not args.quiet, seeds=args.seeds, roofline=roofline)
    means, summary = mean_rows(rows), summarize(rows, args.tolerance)
    if len({r["seed"] for r in rows}) > 1:
        print(f"mean over seeds:\n{'fraction':>8s} {'scheme':8s} {'jobs':>6s} {'NRMSE':>8s} {'sd':>6s} {'MAPE%':>8s} {'step%':>8s}")
        for r in sorted(means, key=lambda r: (r["fraction"], r["scheme"])):
            print(f"{r['fraction']:8.0%} {r['scheme']:8s} {r['n_train']:6d} {r['nrmse']:8.3f} {r['nrmse_sd']:6.3f} "
                  f"{r['mape']:8.1f} {float('nan') if r['step_mape'] is None else r['step_mape']:8.1f}")
    print("\n".join(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"source": source.setting, "target": dataset.setting, "roofline": roofline,
                       "seeds": sorted({r["seed"] for r in rows}), "rows": rows, "means": means,
                       "summary": summary, **script_stamp("transfer_study.py", argv)}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
