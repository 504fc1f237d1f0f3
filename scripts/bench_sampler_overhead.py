"""Measure what the sampler costs: its own CPU time / wall time at 100 Hz, as % of one core.

Starts ``--targets`` idle worker-like processes, each holding ``--sockets`` loopback TCP
connections (so the tcp_info path is exercised) and one child process, samples them for
``--seconds`` and reads the sampler process's CPU clock before and after. Target: <= 3 %.
For scale it also measures the floor: a Python process that only wakes up at the same rate
(select with a timeout) and does nothing else -- on a small VM that alone costs ~1 %.
``host_busy_cores`` tells how loaded the host was meanwhile (all CPUs, from /proc/stat): the
sampler's own CPU time is what is measured, but on a busy host its caches are colder after
each sleep, which changes that time by a few tenths of a percent either way.
``native_reads`` tells whether the sampler used the C loop and reads (``_fastread``) or pure
Python (``DRIPLE_SAMPLER_NATIVE=0`` forces Python). On the 2-core dev VM, 3 targets x 4
sockets, 5 rounds interleaving the code before the C module, this code, and this code in
pure Python, on a host running a collection (0.7-1.4 busy cores): medians 2.95 %, 1.70 % and
3.13 % (read span p50 170, 95 and 180 us; floor 0.85-0.93 %). Single runs vary by +-0.3, so
compare interleaved runs. What is left is mostly kernel time: waking up, the 12 inet_diag
lookups (~75 us with cold caches) and the 6 CPU clock + statm reads (~40 us).

    /work/venv/bin/python scripts/bench_sampler_overhead.py [--targets 3] [--seconds 10] [--json]
"""
from __future__ import annotations

import argparse
import json

from driple.evaluation.bench_sampler import measure


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=3)
    ap.add_argument("--sockets", type=int, default=4, help="TCP connections per target")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--period", type=float, default=0.01, help="sampling period, s")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)

    result = measure(args.targets, args.sockets, args.seconds, args.period)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:34s} {v}")
    return result


if __name__ == "__main__":
    main()
