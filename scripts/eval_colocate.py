#!/usr/bin/env python
"""Co-location predictions against jobs really co-run by the collector.

    python scripts/eval_colocate.py --coruns datasets/v2/corun-cpu-ps-p1w2-1g

What is compared and why: :mod:`driple.evaluation.colocate`.
"""
from __future__ import annotations

import argparse
import json
import sys

from driple.evaluation.colocate import MAX_SLOWDOWN, evaluate_coruns, format_result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coruns", required=True, help="co-run dataset directory (driple collect corun --out)")
    p.add_argument("--setting", default=None,
                   help="inspector: a shipped setting id or a checkpoint path (default: the co-runs' setting)")
    p.add_argument("--solo", default=None, help="dataset with the jobs' solo runs (default: <setting>/ beside the co-runs, "
                   "measured on the same host)")
    p.add_argument("--max-slowdown", type=float, default=MAX_SLOWDOWN,
                   help="a pair fits when no job of it slowed down by more than this factor against "
                   f"its solo run (default {MAX_SLOWDOWN})")
    p.add_argument("--labels", default=None, choices=["v1", "v2"],
                   help="read the co-runs and inspectors as this label version (default: the declared "
                   "one, driple.metrics.DECLARED_LABELS; datasets/v2 needs v2)")
    p.add_argument("--json", metavar="FILE", help="also write the per-co-run comparison here")
    args = p.parse_args(argv)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)
    from driple.errors import DripleError

    try:  # a job the inspector cannot predict, a solo row without a label: said, no traceback
        result = evaluate_coruns(args.coruns, solo=args.solo, max_slowdown=args.max_slowdown,
                                 inspector=args.setting)
    except DripleError as err:
        print(f"eval_colocate: error: {err}", file=sys.stderr)
        return 2
    print(format_result(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
