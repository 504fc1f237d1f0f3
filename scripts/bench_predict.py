#!/usr/bin/env python
"""How fast is a prediction? End to end (trace + op graph + grouping + inference) and batched.

    python scripts/bench_predict.py                    # shipped default inspector, 1 thread
    python scripts/bench_predict.py --threads 2 --repeats 5
    python scripts/bench_predict.py --setting my-models/hybrid --labels v2   # a checkpoint by path

Prints, for a ResNet-50 step (224x224, batch 32, SGD, DDP over 2 workers) and a 12-layer
GPT-style step (GPT-2 small, batch 8): the first prediction in this process (includes torch's
one-time warm-up) and the median of the following ones, split into graph building and
inference; then ``predict_many`` throughput on pre-built graphs in batches, on ``--threads``
and again on all the machine's cores (what a scheduler calling the Python API gets: torch's
default), each as the median and the best of the runs. Targets on this machine: <= 1 s end to
end for ResNet-50 on one core, >= 500 graphs/s batched. The host's single-thread GEMM and copy
figures (:mod:`driple.hardware.host_speed`) are printed first: this VM's speed varies from day to
day (1.5x seen), and noise only ever slows a run down.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setting", default=None,
                   help="shipped inspector or checkpoint path (default: the registry's default)")
    p.add_argument("--labels", choices=["v1", "v2"], default=None,
                   help="label declaration to read the checkpoint under (default: driple's)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--graphs", type=int, default=512, help="graphs for the batched figure")
    p.add_argument("--batch-size", type=int, default=16, help="graphs per pass in predict_many (default 16)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    t_import = time.perf_counter()
    import os

    import torch

    from driple.hardware.host_speed import measure_host_speed
    from driple.predict.predictor import Predictor

    torch.set_num_threads(args.threads)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)
    predictor = Predictor.load(args.setting)
    load_s = time.perf_counter() - t_import
    kind = predictor.inspector.configuration_name + (" (residual)" if predictor.inspector.residual else "")
    host = measure_host_speed()
    results = {"setting": predictor.setting, "configuration": kind, "threads": args.threads,
               "load_s": load_s, "host": host.to_dict(), "models": {}}
    print(f"host: {host.cpu_model}, GEMM {host.flops_per_s / 1e9:.0f} GFLOP/s, copy "
          f"{host.memory_bytes_per_s / 1e9:.1f} GB/s (single thread, just now)")
    print(f"inspector {predictor.setting} ({kind}) loaded in {load_s:.2f} s (imports included); "
          f"{args.threads} thread(s)")
    print(f"{'model':<22}{'first call s':>14}{'median s':>10}{'build s':>9}{'infer s':>9}")
    for name, bs in (("resnet50", 32), ("gpt2_small", 8)):
        times, builds, infers = [], [], []
        for _ in range(args.repeats + 1):
            t0 = time.perf_counter()
            predictor.predict_zoo(name, batch_size=bs)
            times.append(time.perf_counter() - t0)
            builds.append(predictor.timings["build_s"])
            infers.append(predictor.timings["infer_s"])
        row = {"first_s": times[0], "median_s": statistics.median(times[1:]),
               "build_s": statistics.median(builds[1:]), "infer_s": statistics.median(infers[1:])}
        results["models"][f"{name} b{bs}"] = row
        print(f"{name + ' b' + str(bs):<22}{row['first_s']:>14.2f}{row['median_s']:>10.3f}"
              f"{row['build_s']:>9.3f}{row['infer_s']:>9.4f}")

    from driple.graph.build import build_zoo_input

    opts = predictor.inspector.build_options()
    base = [build_zoo_input(m, batch_size=b, strategy=predictor.setting, **opts)
            for m, b in (("resnet", 16), ("mlp", 64), ("vgg", 16), ("lstm_lm", 8))]
    graphs = [base[i % len(base)] for i in range(args.graphs)]

    def throughput(threads: int) -> tuple:
        """(median, best) graphs/s of predict_many on ``threads`` torch threads."""
        torch.set_num_threads(threads)
        predictor.predict_many(graphs[:64], batch_size=args.batch_size)  # warm-up
        runs = []
        for _ in range(max(3, args.repeats)):
            t0 = time.perf_counter()
            predictor.predict_many(graphs, batch_size=args.batch_size)
            runs.append(time.perf_counter() - t0)
        return len(graphs) / statistics.median(runs), len(graphs) / min(runs)

    per_s, best = throughput(args.threads)
    t0 = time.perf_counter()
    for g in graphs[:32]:
        predictor.predict_many([g])
    single_ms = (time.perf_counter() - t0) / 32 * 1e3
    results.update(predict_many_graphs_per_s=per_s, predict_many_best_graphs_per_s=best,
                   single_graph_ms=single_ms)
    print(f"predict_many: {per_s:.0f} graphs/s median, {best:.0f} best ({len(graphs)} graphs, batches of "
          f"{args.batch_size}, {args.threads} thread(s)); one graph at a time: {single_ms:.1f} ms")
    cores = os.cpu_count() or 1
    if cores > args.threads:
        per_s, best = throughput(cores)
        results["all_cores"] = {"threads": cores, "graphs_per_s": per_s, "best_graphs_per_s": best}
        print(f"predict_many on all {cores} cores: {per_s:.0f} graphs/s median, {best:.0f} best")
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
