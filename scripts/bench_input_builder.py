"""Time the input builder on full-size models: trace, op graph + communication, grouping, total.

    python scripts/bench_input_builder.py [--repeats 3] [--no-first-call] [--json]

One thread (torch.set_num_threads(1)), as a scheduler would call it. Per model: the median
of ``--repeats`` builds after one warm-up build, per stage (wall seconds, from the builder's
own timings) and end to end (trace + graph + group, wall and process CPU seconds; CPU time is
the better figure on a busy host, where wall time also counts waiting for a core). The example
batch and the model are made before timing: they are the caller's, not the builder's.

The first build in a *fresh* process pays one-time costs (importing torch_geometric and
torch._dynamo, which the fake-tensor dispatcher needs; filling torch's fake-tensor kernel
cache). It is measured in a subprocess per model, split into the import and the build.

Target: ResNet-50 (224x224, batch 32, SGD, DDP over 2 workers) end to end (builder plus the
~15 ms inference) <= 1 s on one core in a warm process.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CASES = [
    ("resnet50", 32, "ResNet-50, 224x224, batch 32"),
    ("gpt2_small", 8, "GPT-2 small (12 layers, 768 wide), batch 8"),
]

#: Run in a fresh interpreter: the first build, after importing only what a caller would.
FIRST_CALL = """
import json, sys, time
import torch
torch.set_num_threads(1)
from driple.graph.build import build_input
from driple.zoo import build_workload
wl = build_workload(sys.argv[1], batch_size=int(sys.argv[2]))
batch = wl.example_batch
c, t = time.process_time(), time.perf_counter()
import torch_geometric.data  # build_input imports it on first use; timed apart here
imports = (time.perf_counter() - t, time.process_time() - c)
def build():
    c, t = time.process_time(), time.perf_counter()
    build_input(wl.model, batch, loss_fn=wl.loss_fn, optimizer="sgd", strategy="ddp", workers=2)
    return time.perf_counter() - t, time.process_time() - c
first, second = build(), build()
print(json.dumps({"import_s": imports[0], "import_cpu_s": imports[1], "first_build_s": first[0],
                  "first_build_cpu_s": first[1], "second_build_s": second[0], "second_build_cpu_s": second[1]}))
"""


def first_call(name: str, batch: int) -> dict:
    """One-time costs of the first build of ``name`` in a fresh process (see :data:`FIRST_CALL`)."""
    out = subprocess.run([sys.executable, "-c", FIRST_CALL, name, str(batch)], capture_output=True,
                         text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["first_call_s"] = r["import_s"] + r["first_build_s"]
    r["first_call_cpu_s"] = r["import_cpu_s"] + r["first_build_cpu_s"]
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-first-call", action="store_true", help="skip the fresh-process runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import torch

    from driple.graph.build import build_input
    from driple.zoo import build_workload

    torch.set_num_threads(1)
    rows = []
    for name, batch_size, label in CASES:
        t = time.perf_counter()
        wl = build_workload(name, batch_size=batch_size)
        model_s = time.perf_counter() - t
        batch = wl.example_batch
        runs = []
        for _ in range(args.repeats + 1):
            c, t = time.process_time(), time.perf_counter()
            data = build_input(wl.model, batch, loss_fn=wl.loss_fn, optimizer="sgd", strategy="ddp", workers=2)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            runs.append({**{k: data.summary[k] for k in ("trace_s", "graph_s", "group_s", "total_s")},
                         "wall_s": wall, "cpu_s": cpu})
        warm, rest = runs[0], runs[1:]
        med = {k: statistics.median(r[k] for r in rest) for k in rest[0]}
        row = {"model": name, "batch_size": batch_size, "label": label, "ops": data.summary["ops"],
               "groups": data.summary["groups"], "model_build_s": model_s, "warmup_build_s": warm["wall_s"],
               "min_cpu_s": min(r["cpu_s"] for r in rest), **med}
        if not args.no_first_call:
            row["fresh_process"] = first_call(name, batch_size)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<45} {'ops':>5} {'trace':>6} {'graph':>6} {'group':>6} {'builder':>8} {'CPU':>6} {'model()':>8}")
    for r in rows:
        print(f"{r['label']:<45} {r['ops']:>5} {r['trace_s']:>5.2f}s {r['graph_s']:>5.2f}s {r['group_s']:>5.2f}s "
              f"{r['total_s']:>7.2f}s {r['cpu_s']:>5.2f}s {r['model_build_s']:>7.2f}s")
    print(f"(median of {args.repeats} builds after a warm-up build, wall seconds; builder = trace + graph + "
          "group; CPU = process CPU seconds of the whole build_input call; model() = constructing the "
          "model, not part of the builder)")
    print()
    for r in rows:
        print(f"end to end, builder only: {r['model']} b{r['batch_size']}: {r['total_s']:.2f} s wall, "
              f"{r['cpu_s']:.2f} s CPU (best {r['min_cpu_s']:.2f} s)")
    for r in rows:
        f = r.get("fresh_process")
        if f:
            print(f"first call in a fresh process: {r['model']} b{r['batch_size']}: {f['first_call_s']:.2f} s wall "
                  f"({f['first_call_cpu_s']:.2f} s CPU) = import torch_geometric + torch._dynamo "
                  f"{f['import_s']:.2f} s + first build {f['first_build_s']:.2f} s; the next build "
                  f"{f['second_build_s']:.2f} s")


if __name__ == "__main__":
    main()
