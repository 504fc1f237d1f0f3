#!/usr/bin/env python
"""Multi-node (rendezvous) rows against one-host rows of the same jobs, by the retest rule.

    python scripts/compare_launchers.py            # the shipped pair, beside that hour's retest
    python scripts/compare_launchers.py --one-host A --multi-node B --json

The rows: each job of the grid measured by
`driple collect sweep --grid G --out A --max-jobs 1` and `... --out B --nodes 2 --max-jobs 1`,
alternately (datasets/v2/README.md has the exact commands).
"""
import argparse
import json

from driple.evaluation.launchers import compare_launchers, format_comparison

V2 = "datasets/v2"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one-host", default=f"{V2}/cpu-ddp-w2-1g-nodes2-pair")
    ap.add_argument("--multi-node", default=f"{V2}/cpu-ddp-w2-1g-nodes2")
    ap.add_argument("--retest", nargs=2, metavar=("FIRST", "AGAIN"),
                    default=[f"{V2}/cpu-ddp-w2-1g-nodes2-pair", f"{V2}/cpu-ddp-w2-1g-nodes2-pair-retest"],
                    help="the one-host launcher's own test-retest pair (default: the same 10 jobs, "
                    "measured again in the same hour)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = compare_launchers(args.one_host, args.multi_node, tuple(args.retest))
    print(json.dumps(result, indent=1) if args.json else format_comparison(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
