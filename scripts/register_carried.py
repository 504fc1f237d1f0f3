#!/usr/bin/env python
"""Record in a shipped inspector's registry entry how far its predictions carried to another
machine, measured (``driple hardware evaluate --json``): a profile predicted with
``--hardware`` then prints that error beside the prediction.

    python scripts/register_carried.py --setting cpu-ddp-w2-lo \\
        --evaluation trained_models/evaluation/hardware/lo-drift-quota1.json \\
        --machine "the same AMD EPYC host under a one-core cgroup quota"

Repeat ``--evaluation``/``--machine`` pairs for several machines; the entry's earlier records
are replaced.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setting", required=True, help="a shipped setting")
    p.add_argument("--evaluation", action="append", required=True, metavar="FILE",
                   help="a `driple hardware evaluate --json` result for that setting (repeatable)")
    p.add_argument("--machine", action="append", required=True,
                   help="the machine its jobs ran on, in words (one per --evaluation)")
    args = p.parse_args(argv)
    from driple.errors import DripleError
    from driple.evaluation.hardware import carried_summary
    from driple.predict.registry import set_entry_field

    if len(args.evaluation) != len(args.machine):
        print("register_carried: give one --machine per --evaluation", file=sys.stderr)
        return 2
    try:
        records = []
        for path, machine in zip(args.evaluation, args.machine):
            try:
                result = json.load(open(path))
            except (OSError, ValueError) as exc:
                raise DripleError(f"{path}: not a readable evaluation ({exc})") from None
            if result.get("setting") != args.setting:
                raise DripleError(f"{path} evaluates {result.get('setting')!r}, not {args.setting!r}")
            records.append(carried_summary(result, machine, command=f"driple hardware evaluate --setting "
                                           f"{args.setting} --dataset {result.get('dataset')}"))
        written = set_entry_field("carried", {args.setting: records})
    except DripleError as err:
        print(f"register_carried: error: {err}", file=sys.stderr)
        return 2
    for r in records:
        print(f"{args.setting}: carried to {r['machine']} ({r['jobs']} jobs): step time {r['step_time_mape']:.1f} %, "
              f"durations median {r['durations_median_mape']:.1f} %")
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
