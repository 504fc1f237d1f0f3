#!/usr/bin/env python
"""How well a dataset's labels repeat: the jobs of its retest measured again (step-relative rule),
the two workers of each job against each other, and the host's speed between the two runs.

    python scripts/retest_table.py datasets/v2/cpu-fsdp-w2-1g datasets/v2/cpu-fsdp-w2-1g-retest

The rule and the tables: :mod:`driple.collect.retest`.
"""
from __future__ import annotations

import json
import os
import sys


def _rounded(summary: dict) -> dict:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in summary.items()}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python scripts/retest_table.py DATASET RETEST_DATASET", file=sys.stderr)
        return 2
    from driple.collect.retest import host_ratio_table, retest_table, worker_table
    from driple.errors import DripleError

    first, again = argv
    for d in argv:
        if not os.path.exists(os.path.join(d, "results.csv")):
            print(f"retest_table: error: no results.csv in {d}", file=sys.stderr)
            return 2
    try:
        table = retest_table(first, again)
        print(f"{len(table['jobs'])} jobs measured twice")
        for label, summary in table["labels"].items():
            print(f"  {label:24s} {json.dumps(_rounded(summary))}")
        print("workers:", json.dumps(worker_table(first)))
        print("host:", json.dumps(host_ratio_table(first, again)))
    except (DripleError, OSError) as err:
        print(f"retest_table: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
