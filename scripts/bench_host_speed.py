#!/usr/bin/env python
"""The host figures of the physical priors: single-thread GEMM FLOP/s, copy bandwidth and (with
``--loopback``) the rate of a gloo all-reduce on loopback (see :mod:`driple.hardware.host_speed`).

    python scripts/bench_host_speed.py                  # ~0.5 s
    python scripts/bench_host_speed.py --loopback --runs 3 --json

Run it on a quiet host (under the project's host lock while datasets are measured): the figures
are what an inspector trained on this host records as its hardware.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loopback", action="store_true", help="also measure a 2-process gloo all-reduce")
    p.add_argument("--runs", type=int, default=1, help="repeat the whole measurement (default 1)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    from driple.hardware.host_speed import measure_host_speed, measure_loopback_rate

    runs = []
    for _ in range(args.runs):
        speed = measure_host_speed().to_dict()
        if args.loopback:
            speed["measured_loopback_bytes_per_s"] = measure_loopback_rate()
        runs.append(speed)
        line = (f"{speed['cpu_model']}: GEMM {speed['flops_per_s'] / 1e9:.1f} GFLOP/s, copy "
                f"{speed['memory_bytes_per_s'] / 1e9:.1f} GB/s (read + written)")
        if args.loopback:
            line += f", gloo all-reduce on loopback {speed['measured_loopback_bytes_per_s'] / 1e9:.2f} GB/s per worker"
        print(line)
    if args.json:
        print(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
