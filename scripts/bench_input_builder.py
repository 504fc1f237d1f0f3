"""Time the input builder on full-size models: trace, op graph + communication, grouping, total.

    python scripts/bench_input_builder.py [--repeats 3] [--json]

One thread (torch.set_num_threads(1)), as a scheduler would call it. Figures are the median of
``--repeats`` builds after one warm-up build (which pays torch's one-time import/dispatch costs;
its time is printed too). Target: ResNet-50 (224x224, batch 32) end to end <= 2 s on one core.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from driple.graph.build import build_input
from driple.zoo import build_workload

CASES = [
    ("resnet50", 32, "ResNet-50, 224x224, batch 32"),
    ("gpt2_small", 8, "GPT-2 small (12 layers, 768 wide), batch 8"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name, batch, label in CASES:
        t = time.perf_counter()
        wl = build_workload(name, batch_size=batch)
        model_s = time.perf_counter() - t
        runs = []
        for i in range(args.repeats + 1):
            t = time.perf_counter()
            data = build_input(wl.model, wl.example_batch, loss_fn=wl.loss_fn, optimizer="sgd",
                               strategy="ddp", workers=2)
            wall = time.perf_counter() - t
            runs.append({**{k: data.summary[k] for k in ("trace_s", "graph_s", "group_s")}, "total_s": wall})
        first, rest = runs[0], runs[1:]
        med = {k: statistics.median(r[k] for r in rest) for k in rest[0]}
        rows.append({"model": name, "label": label, "ops": data.summary["ops"], "groups": data.summary["groups"],
                     "model_build_s": model_s, "first_build_s": first["total_s"], **med})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<45} {'ops':>6} {'trace':>7} {'graph':>7} {'group':>7} {'total':>7} {'1st':>7} {'model()':>8}")
    for r in rows:
        print(f"{r['label']:<45} {r['ops']:>6} {r['trace_s']:>6.2f}s {r['graph_s']:>6.2f}s {r['group_s']:>6.2f}s "
              f"{r['total_s']:>6.2f}s {r['first_build_s']:>6.2f}s {r['model_build_s']:>7.2f}s")
    print(f"(median of {args.repeats} builds after a warm-up; 1st = the warm-up build; "
          "model() = constructing the model, not part of the builder)")


if __name__ == "__main__":
    main()
