"""Time the inspector on this machine: training throughput and prediction latency.

    python scripts/bench_inspector.py                      # 100-group graphs, K=50, 1 and 2 threads
    python scripts/bench_inspector.py --threads 1 --repeats 20 --graphs 64 --epochs 2
    python scripts/bench_inspector.py --threads 1 --groups 100 --repeats 50 --graphs 200
    python scripts/bench_inspector.py --zoo resnet gpt_tiny  # real grouped graphs from the builder

Graphs are synthetic unless ``--zoo`` is given: ``--groups`` nodes, each joined to ~3 others
(about what fluid communities of a training step give), random raw features. Figures:

- training: graphs per second of full epochs (Adam step per batch of ``--batch-size``), also for
  the two fine-tuning schemes (paper: φr' + MLP trainable; mlp: MLP only), with the frozen
  prefix recomputed every epoch or cached once (:func:`driple.inspector.transfer.cache_frozen`);
- prediction: median latency of :meth:`TrainedInspector.predict` for one graph (scaling included) and
  graphs per second when ``--predict-batch`` graphs are predicted in one call (the baseline runs
  them as one batch, as it did; the new path with its default batching).

``baseline`` rows run the same weights through the pre-fusion path in the same run: the layers'
own modules (:func:`driple.inspector.model.reference_forward`: GCNConv on a sparse adjacency
normalised every pass, GRUCell, scatter Set2Set) fed by PyG's DataLoader, training without
flushing denormals — what the inspector did before the fused kernel. A training "graph" is
one graph of an epoch; each epoch also scores ``--batch-size`` validation graphs, included in
the time, and the first epoch pays for allocating buffers (use ``--epochs 3`` or more).

Each figure is reported as wall time and as process CPU time (robust to other jobs sharing the
host: what the run costs, not how long it waited).
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from driple.evaluation.bench_inspector import bench, synthetic_graph, zoo_graphs


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=100, help="groups per graph (default 100)")
    parser.add_argument("--repeats", type=int, default=50, help="repetitions K of φr (default 50)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden channels (default 64)")
    parser.add_argument("--graphs", type=int, default=200, help="graphs per epoch (default 200)")
    parser.add_argument("--batch-size", type=int, default=32, help="graphs per batch (default 32)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per scheme (default 2)")
    parser.add_argument("--predict-batch", type=int, default=None,
                        help="graphs per predict call (default: all --graphs)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the pre-fusion reference path")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="torch thread counts to try (default 1 2)")
    parser.add_argument("--zoo", nargs="+", metavar="MODEL", help="use real graphs of these zoo models")
    args = parser.parse_args(argv)

    if args.zoo:
        graphs = zoo_graphs(args.zoo, args.groups, args.graphs)
    else:
        graphs = [synthetic_graph(args.groups, seed) for seed in range(args.graphs)]
    edges = np.mean([g.edge_index.size(1) / 2 for g in graphs])
    print(f"{len(graphs)} graphs of {graphs[0].num_nodes} groups, {edges:.0f} undirected edges on "
          f"average; K={args.repeats}, hidden={args.hidden}, batch {args.batch_size}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        print(f"torch threads: {threads}")
        bench(graphs, args.repeats, args.hidden, args.batch_size, args.epochs,
              args.predict_batch or len(graphs), not args.no_baseline)


if __name__ == "__main__":
    main()
