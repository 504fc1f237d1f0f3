"""Time one training iteration of zoo models on one CPU thread and print a table (ms).

    python scripts/bench_zoo_step_time.py                 # every family default
    python scripts/bench_zoo_step_time.py --presets       # + the small (non full-size) presets
    python scripts/bench_zoo_step_time.py --sweep 20      # + 20 sweep_configs() picks, vs. estimate
    python scripts/bench_zoo_step_time.py resnet gpt_tiny --optimizer adam

An iteration is ``out = model(x); loss_fn(out, y).backward(); opt.step(); opt.zero_grad()``;
the time is the median of ``--repeats`` iterations after ``--warmup`` untimed ones.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import torch

from driple.zoo import build_workload, estimate_step_seconds, list_models, make_optimizer, sweep_configs


def time_step(name: str, batch_size: int | None = None, optimizer: str = "sgd", warmup: int = 2,
              repeats: int = 5, **knobs) -> tuple[float, int, int]:
    """Median seconds of one training iteration, the parameter count and the batch size."""
    w = build_workload(name, batch_size, **knobs)
    opt = make_optimizer(optimizer, w.model.parameters())
    inputs, targets = w.example_batch
    times = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        loss = w.loss_fn(w.model(inputs), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times), w.num_parameters, w.batch_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="model names (default: every family default)")
    parser.add_argument("--presets", action="store_true", help="also the presets that are not full-size")
    parser.add_argument("--sweep", type=int, default=0, metavar="N", help="also N random sweep_configs() entries")
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    specs = list_models()
    jobs = [dict(name=n, knobs={}, batch_size=None, optimizer=args.optimizer) for n in args.names]
    if not args.names:
        jobs += [dict(name=s.name, knobs={}, batch_size=None, optimizer=args.optimizer)
                 for s in specs if s.name == s.family]
    if args.presets:
        jobs += [dict(name=s.name, knobs={}, batch_size=None, optimizer=args.optimizer)
                 for s in specs if s.name != s.family and not s.preset]
    if args.sweep:
        jobs += random.Random(0).sample(sweep_configs(), args.sweep)

    print(f"{'model':22s} {'knobs':40s} {'opt':5s} {'batch':>5s} {'params':>9s} {'est ms':>8s} {'ms':>8s}")
    for job in jobs:
        seconds, params, batch = time_step(job["name"], job["batch_size"], job["optimizer"], args.warmup,
                                           args.repeats, **job["knobs"])
        est = estimate_step_seconds(job["name"], batch, job["optimizer"], **job["knobs"])
        knobs = ",".join(f"{k}={v}" for k, v in job["knobs"].items())
        print(f"{job['name']:22s} {knobs[:40]:40s} {job['optimizer']:5s} {batch:5d} {params / 1e6:8.2f}M "
              f"{est * 1e3:8.1f} {seconds * 1e3:8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
