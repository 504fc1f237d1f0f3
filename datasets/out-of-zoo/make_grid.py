"""Write ``grid.yaml`` of the out-of-zoo set, with each job's step time measured here.

    flock /work/host.lock python datasets/out-of-zoo/make_grid.py      # ~2 min on one core

Each job of :data:`JOBS` is built (random weights) and trained for a few steps on one CPU
thread in this process (forward, the model's loss, backward, optimizer step); the median step
time after one warm-up step is stored as ``est_seconds`` (informative: the sweep measures for
real) beside the parameter count. The jobs are meant to take 0.05-2 s per step; a job outside
that range is reported. Models are named ``datasets/out-of-zoo/models.py:<factory>``: relative
to the driple checkout, so the grid runs from any directory with an editable install
(:func:`driple.zoo.workload.find_user_file`) and its rows rebuild their graphs anywhere.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = "datasets/out-of-zoo/models.py"  # relative to the checkout (see the module docstring)
SETTING = "cpu-ddp-w2-lo"  # the source setting: the set is measured there, never trained on
STEP_RANGE_S = (0.05, 2.0)

#: (factory, batch size, optimizer, knobs): three or four sizes per architecture, batch sizes
#: and optimizers varied, 11 architectures.
JOBS = [
    ("llama", 8, "sgd", {}),
    ("llama", 16, "adam", {"layers": 2, "hidden": 192, "heads": 6}),
    ("llama", 4, "adamw", {"layers": 6, "hidden": 256, "heads": 8, "seq_len": 128}),
    ("llama", 8, "sgd", {"layers": 8, "hidden": 384, "heads": 6, "seq_len": 128}),
    ("opt", 8, "sgd", {}),
    ("opt", 16, "adam", {"layers": 6, "hidden": 192, "heads": 6}),
    ("opt", 2, "adamw", {"layers": 8, "hidden": 384, "heads": 6, "seq_len": 128}),
    ("gpt_neo", 8, "adamw", {}),
    ("gpt_neo", 16, "adam", {"layers": 2, "seq_len": 32}),
    ("gpt_neo", 4, "sgd", {"layers": 6, "hidden": 256, "heads": 8, "seq_len": 128}),
    ("bloom", 8, "sgd", {}),
    ("bloom", 8, "adamw", {"layers": 6, "hidden": 256, "heads": 8}),
    ("bloom", 2, "adam", {"layers": 4, "hidden": 384, "heads": 6, "seq_len": 256}),
    ("albert", 8, "adamw", {}),
    ("albert", 64, "adam", {"layers": 2, "hidden": 128, "seq_len": 32}),
    ("albert", 16, "sgd", {"layers": 8}),
    ("t5", 8, "sgd", {}),
    ("t5", 16, "adamw", {"layers": 4, "hidden": 256, "heads": 8, "seq_len": 128, "target_len": 32}),
    ("t5", 4, "adam", {"layers": 3, "hidden": 192, "heads": 6, "seq_len": 256, "target_len": 64}),
    ("bart", 8, "adam", {}),
    ("bart", 16, "sgd", {"layers": 3, "hidden": 256, "seq_len": 128, "target_len": 32}),
    ("bart", 4, "adamw", {"layers": 6, "hidden": 384, "heads": 6, "seq_len": 128, "target_len": 64}),
    ("convnext", 16, "sgd", {}),
    ("convnext", 32, "adamw", {"width": 48}),
    ("convnext", 8, "adam", {"width": 64, "depth": 3, "image_size": 64}),
    ("convnext", 8, "sgd", {"width": 96, "depth": 3, "image_size": 64}),
    ("swin", 16, "adamw", {}),
    ("swin", 32, "sgd", {"width": 64}),
    ("swin", 8, "adam", {"width": 96, "image_size": 64, "window": 8}),
    ("regnet", 32, "sgd", {}),
    ("regnet", 128, "adam", {}),
    ("regnet", 16, "adamw", {"width": 64, "depth": 3, "image_size": 64, "group": 32}),
    ("mobilevit", 16, "sgd", {}),
    ("mobilevit", 32, "adamw", {"width": 96}),
    ("mobilevit", 8, "adam", {"image_size": 128}),
]


def measure(factory: str, batch_size: int, optimizer: str, knobs: dict, steps: int = 3) -> tuple[float, int]:
    """``(median step time in s after one warm-up step, parameters)`` on this thread."""
    import torch

    from driple.zoo.optim import make_optimizer
    from driple.zoo.workload import load_workload, step_loss

    torch.manual_seed(0)
    w = load_workload(f"{HERE / 'models.py'}:{factory}", batch_size, knobs)
    opt = make_optimizer(optimizer, w.model.parameters())
    inputs, targets = w.make_batch(batch_size, generator=torch.Generator().manual_seed(0))
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        step_loss(w.model, inputs, targets, w.loss_fn).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]), sum(p.numel() for p in w.model.parameters())


def main(argv=None) -> int:
    import warnings

    import torch
    import yaml

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE / "grid.yaml"), help="grid file (default: beside this script)")
    parser.add_argument("--steps", type=int, default=3, help="measured steps per job (default 3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    jobs, outside = [], []
    for factory, bs, opt, knobs in JOBS:
        seconds, params = measure(factory, bs, opt, knobs, args.steps)
        print(f"{factory:10s} bs {bs:3d} {opt:6s} {knobs!s:70s} {seconds:7.3f} s  {params / 1e6:6.2f} M", flush=True)
        if not STEP_RANGE_S[0] <= seconds <= STEP_RANGE_S[1]:
            outside.append(f"{factory} {knobs} bs {bs}: {seconds:.3f} s")
        jobs.append({"model": f"{MODELS}:{factory}", "knobs": knobs, "batch_size": bs, "optimizer": opt,
                     "est_seconds": round(seconds, 3), "params": params})
    doc = {"setting": SETTING, "seconds": 6.0, "warmup": 5, "min_iterations": 20, "max_seconds": 120.0,
           "jobs": jobs}
    header = ("# driple collect sweep grid: the out-of-zoo set (datasets/out-of-zoo/README.md), written by\n"
              "# datasets/out-of-zoo/make_grid.py; est_seconds: one step on one CPU thread, measured there\n")
    Path(args.out).write_text(header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    print(f"wrote {len(jobs)} jobs to {args.out}")
    if outside:
        print("outside 0.05-2 s per step:\n  " + "\n  ".join(outside), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
