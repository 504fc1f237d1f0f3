#!/usr/bin/env python
"""Which strategy is faster, and which holds less memory per rank: predicted against measured,
on the jobs measured under both settings.

    python scripts/eval_strategies.py                                   # DDP vs FSDP on loopback
    python scripts/eval_strategies.py --json trained_models/evaluation/strategies.json
    python scripts/eval_strategies.py --first-per-family 5 --table pairs.md   # 5 jobs, 10 pairs

What is compared and why: :mod:`driple.evaluation.strategies`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", default="cpu-ddp-w2-lo,cpu-fsdp-w2-lo", help="two shipped settings, A,B")
    p.add_argument("--datasets", default="datasets", help="datasets directory with settings.json")
    p.add_argument("--tie", type=float, default=0.05,
                   help="a measured difference within this share is a tie, reported apart (default 0.05)")
    p.add_argument("--limit", type=int, default=None, help="at most this many jobs (dataset order)")
    p.add_argument("--first-per-family", type=int, default=None, metavar="N",
                   help="only the first job of each of the first N families in the order of --grid "
                   "(a rule fixed before the outcome: driple.evaluation.strategies.first_per_family)")
    p.add_argument("--grid", default=None,
                   help="grid file whose order --first-per-family follows (default: the second "
                   "setting's dataset's grid.yaml)")
    p.add_argument("--table", metavar="FILE", help="also write the model-metric pairs as a markdown table")
    p.add_argument("--json", metavar="FILE", help="also write the verdicts here")
    args = p.parse_args(argv)
    from driple.collect.provenance import script_stamp
    from driple.errors import DripleError
    from driple.evaluation.strategies import strategy_agreement
    from driple.setting_datasets import SettingDatasets

    try:
        a, b = args.settings.split(",")
        index = SettingDatasets.load(args.datasets)
        grid = args.grid or os.path.join(index.dataset_dir(b), "grid.yaml")
        result = strategy_agreement(a, b, index.dataset_dir(a), index.dataset_dir(b), tie=args.tie,
                                    limit=args.limit, progress=True, grid=grid,
                                    families=args.first_per_family)
    except (DripleError, ValueError) as err:
        print(f"eval_strategies: {err}", file=sys.stderr)
        return 2
    for metric, s in result["summary"].items():
        print(f"{metric}: predicted order agrees on {s['agree']} of {s['jobs']} jobs; on the "
              f"{s['clear']} whose measured difference exceeds {args.tie:.0%}: {s['agree_clear']}; "
              f"measured lower: {s['measured_lower']}")
    if args.table:
        from driple.evaluation.strategies import pairs_table

        with open(args.table, "w") as f:
            f.write(pairs_table(result))
        print(f"wrote {args.table}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"section": "strategies", **script_stamp("eval_strategies.py", argv), **result}, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
