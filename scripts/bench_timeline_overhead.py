"""What recording a timeline costs a training step: marks vs torch.profiler vs nothing, side by side.

Two gloo DDP ranks (one thread each, loopback) train the same zoo job three ways, interleaved
in windows within one run, so host noise hits all three alike:

- ``plain``: DDP with its own all-reduce, nothing recorded;
- ``marks``: what the collector does on CPU hosts — the timed all-reduce thread, iteration and
  compute marks, allocator samples at every module call and gradient
  (:mod:`driple.collect.timeline.recorder`);
- ``profiler``: DDP's own all-reduce under ``torch.profiler`` with memory events (what the
  GPU path does; on CPU it records every ATen op).

Prints the median step time of each and its ratio to ``plain`` per job (target: marks <= 1.03
on the zoo's median job). Run on a quiet host:

    python scripts/bench_timeline_overhead.py                     # the default jobs
    python scripts/bench_timeline_overhead.py --jobs resnet,bs=32 --rounds 8 --window 5 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys

from driple.evaluation.bench_timeline import DEFAULT_JOBS, bench


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--jobs", nargs="+", default=DEFAULT_JOBS, help="zoo jobs MODEL[,knob=v][,bs=N]")
    parser.add_argument("--rounds", type=int, default=6, help="windows per mode, interleaved (default 6)")
    parser.add_argument("--window", type=int, default=5, help="iterations per window (default 5)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    from driple.collect.sweep import host_busy_pct

    busy = host_busy_pct(2.0)
    print(f"host busy before the run: {busy:.0f} % of its CPU (a quiet host is < 5 %)", file=sys.stderr)
    results = []
    print(f"{'job':<16}{'plain':>10}{'marks':>10}{'profiler':>10}{'marks/plain':>13}{'profiler/plain':>16}")
    for job in args.jobs:
        r = bench(job, args.rounds, args.window)
        results.append(r)
        s, q = r["step_s"], r["ratio"]
        print(f"{job:<16}{s['plain'] * 1e3:>8.1f}ms{s['marks'] * 1e3:>8.1f}ms{s['profiler'] * 1e3:>8.1f}ms"
              f"{q['marks']:>13.3f}{q['profiler']:>16.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"host_busy_pct_before": busy, "rounds": args.rounds, "window": args.window,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
