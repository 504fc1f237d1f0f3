"""Time one training iteration of zoo models on one CPU thread and print a table (ms).

    python scripts/bench_zoo_step_time.py                 # every family default
    python scripts/bench_zoo_step_time.py --presets       # + the small (non full-size) presets
    python scripts/bench_zoo_step_time.py --sweep 66      # + 66 sweep_configs() entries
    python scripts/bench_zoo_step_time.py --presets --sweep 132 --seed 2 --warmup 1 --repeats 3 \
        --save driple/zoo/step_times.json               # the timings the estimate is fitted to
    python scripts/bench_zoo_step_time.py --fit driple/zoo/step_times.json   # refit driple.zoo.sweep
    python scripts/bench_zoo_step_time.py resnet gpt_tiny --optimizer adam

An iteration is ``out = model(x); loss_fn(out, y).backward(); opt.step(); opt.zero_grad()``.
Columns: ``est`` is :func:`driple.zoo.estimate_step_seconds`; ``cpu`` is the least process CPU
time of ``--repeats`` iterations after ``--warmup`` untimed ones (with one thread, what a step
takes on an idle core, and robust to other jobs on a shared host); ``wall`` is the median wall time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from driple.zoo import build_workload, estimate_step_seconds, list_models, make_optimizer, resolve_config, sweep_configs
from driple.zoo.optim import OPTIMIZERS
from driple.zoo.registry import family_of
from driple.zoo.sweep import config_key, forward_cost


def time_step(name: str, batch_size: int | None = None, optimizer: str = "sgd", warmup: int = 2,
              repeats: int = 5, **knobs) -> tuple[list[float], list[float], int, int]:
    """CPU and wall seconds of each timed training iteration, the parameter count, the batch size."""
    w = build_workload(name, batch_size, **knobs)
    opt = make_optimizer(optimizer, w.model.parameters())
    inputs, targets = w.example_batch
    cpu, wall = [], []
    for i in range(warmup + repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        loss = w.loss_fn(w.model(inputs), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if i >= warmup:
            cpu.append(time.process_time() - start_cpu)
            wall.append(time.perf_counter() - start)
    return cpu, wall, w.num_parameters, w.batch_size


def fit(rows: list[dict]) -> None:
    """Fit the step-time model of :mod:`driple.zoo.sweep` to timings and print its coefficients.

    ``rows`` hold name, knobs, batch_size, optimizer and the measured seconds of one step. The
    fit minimises the squared log ratio estimate / measured over positive coefficients.
    """
    from scipy.optimize import least_squares, nnls

    fams = sorted({family_of(r["name"]).name for r in rows})
    cols = [f"flop:{f}" for f in fams] + [f"element:{f}" for f in fams] + ["op"] + [f"param:{o}" for o in OPTIMIZERS]
    a = np.zeros((len(rows), len(cols)))
    for i, r in enumerate(rows):
        family = family_of(r["name"]).name
        c, b = forward_cost(family, config_key(resolve_config(r["name"], **r["knobs"]))), r["batch_size"]
        a[i, cols.index(f"flop:{family}")] = b * c.flops
        a[i, cols.index(f"element:{family}")] = b * c.elements
        a[i, cols.index("op")] = c.ops
        a[i, cols.index(f"param:{r['optimizer']}")] = c.params
    y = np.array([r["seconds"] for r in rows])
    scale = np.array([1e-10 if c.startswith("flop") else 1e-4 if c == "op" else 1e-9 for c in cols])
    start, _ = nnls(a / y[:, None], np.ones(len(rows)))  # relative least squares, as a start

    def log_ratio(z):
        return np.log(a @ (np.exp(z) * scale)) - np.log(y)

    z0 = np.log(np.clip(start / scale, 0.01, 100))
    z = least_squares(log_ratio, z0, bounds=(np.log(1e-3), np.log(1e3))).x
    coef = np.exp(z) * scale
    print("\nfitted coefficients (paste into driple/zoo/sweep.py):")
    for name, value in zip(cols, coef):
        print(f"  {name:20s} {value:.3g}")
    ratio = np.exp(log_ratio(z))
    print(f"estimate / measured over {len(rows)} steps: median {np.median(ratio):.2f}, 5-95% "
          f"{np.percentile(ratio, 5):.2f}-{np.percentile(ratio, 95):.2f}, worst {ratio.min():.2f} / {ratio.max():.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="model names (default: every family default)")
    parser.add_argument("--presets", action="store_true", help="also the presets that are not full-size")
    parser.add_argument("--sweep", type=int, default=0, metavar="N", help="also the first N sweep_configs() entries")
    parser.add_argument("--seed", type=int, default=1, help="seed of sweep_configs() (default 1)")
    parser.add_argument("--save", metavar="JSON", help="write the timings to this file")
    parser.add_argument("--fit", metavar="JSON", help="fit the estimate's coefficients to saved timings and stop")
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.fit:
        fit(json.loads(Path(args.fit).read_text()))
        return 0

    specs = list_models()
    jobs = [dict(name=n, knobs={}, batch_size=None, optimizer=args.optimizer) for n in args.names]
    if not args.names:
        jobs += [dict(name=s.name, knobs={}, batch_size=None, optimizer=args.optimizer)
                 for s in specs if s.name == s.family]
    if args.presets:
        jobs += [dict(name=s.name, knobs={}, batch_size=None, optimizer=args.optimizer)
                 for s in specs if s.name != s.family and not s.preset]
    if args.sweep:
        jobs += sweep_configs(seed=args.seed, n=args.sweep)

    print(f"{'model':20s} {'knobs':44s} {'opt':5s} {'batch':>5s} {'params':>8s} {'est':>7s} {'cpu':>7s} "
          f"{'wall':>7s}  (ms)")
    rows = []
    for job in jobs:
        cpu, wall, params, batch = time_step(job["name"], job["batch_size"], job["optimizer"], args.warmup,
                                         args.repeats, **job["knobs"])
        est = estimate_step_seconds(job["name"], batch, job["optimizer"], **job["knobs"])
        knobs = ",".join(f"{k}={v}" for k, v in job["knobs"].items()).replace(" ", "")
        print(f"{job['name']:20s} {knobs[:44]:44s} {job['optimizer']:5s} {batch:5d} {params / 1e6:7.2f}M "
              f"{est * 1e3:7.1f} {min(cpu) * 1e3:7.1f} {statistics.median(wall) * 1e3:7.1f}", flush=True)
        rows.append(dict(name=job["name"], knobs=job["knobs"], batch_size=batch, optimizer=job["optimizer"],
                         seconds=min(cpu), wall_seconds=statistics.median(wall)))
    if args.save:
        Path(args.save).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
