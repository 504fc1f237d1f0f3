"""Build driple/graph/op_frequency.json: how often each op type occurs in the zoo's training graphs.

The corpus is every non-preset zoo model at its default size and batch, with each optimizer
(sgd, adam, adamw) under DDP with 2 workers, plus SGD under a parameter server (1 server,
2 workers). Re-run after changing the zoo or the op-graph rules; inspectors trained with an
older vocabulary refuse a new one (its digest changes).

    python scripts/build_op_frequency.py [--out driple/graph/op_frequency.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from tqdm import tqdm

import driple
from driple.graph.build import op_graph_for
from driple.graph.features import OpVocabulary
from driple.zoo import OPTIMIZERS, build_workload, list_models


def corpus_jobs():
    for spec in list_models():
        if spec.preset:
            continue
        for opt in OPTIMIZERS:
            yield spec.name, opt, "ddp"
        yield spec.name, "sgd", "ps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(driple.__file__).parent / "graph" / "op_frequency.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    graphs, start = [], time.perf_counter()
    jobs = list(corpus_jobs())
    for name, opt, strategy in tqdm(jobs, desc="tracing zoo"):
        wl = build_workload(name)
        graph, *_ = op_graph_for(wl.model, wl.example_batch, wl.loss_fn, opt, strategy, workers=2, servers=1)
        graphs.append(graph)
    corpus = (f"{len(graphs)} training graphs: {len(jobs) // 4} zoo models x (sgd, adam, adamw under "
              f"DDP w2 + sgd under PS p1w2); torch {torch.__version__}, driple {driple.__version__}, "
              f"{platform.node()}, {datetime.now(timezone.utc):%Y-%m-%d}")
    vocab = OpVocabulary.from_graphs(graphs, corpus)
    Path(args.out).write_text(json.dumps(vocab.to_json(), indent=1) + "\n")
    print(f"{len(vocab.counts)} op types over {vocab.total:,} ops, median graph {vocab.reference_nodes} ops, "
          f"digest {vocab.digest}, {time.perf_counter() - start:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
