"""The inspector's training throughput and prediction latency on this machine, beside the
pre-fusion reference path (``scripts/bench_inspector.py`` parses its options and prints
:func:`bench` for each thread count; its docstring says what each figure is).
"""
from __future__ import annotations

import contextlib
import copy
import statistics
import time

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from driple.inspector.model import Inspector, reference_forward, run_batch
from driple.inspector.checkpoint import TrainedInspector
from driple.inspector.scaling import FeatureScaler, TargetScaler
import driple.inspector.train as train_module
from driple.inspector.train import TrainOptions, fit
from driple.inspector.transfer import cache_frozen, freeze_for_transfer
from driple.metrics import target_names


def synthetic_graph(groups: int, seed: int) -> Data:
    g = torch.Generator().manual_seed(seed)
    src = torch.arange(groups).repeat(2)
    dst = torch.randint(0, groups, (2 * groups,), generator=g)
    keep = src != dst
    edge_index, weight = to_undirected(torch.stack([src[keep], dst[keep]]),
                                       torch.randint(1, 30, (int(keep.sum()),), generator=g).float(), groups)
    x = torch.rand(groups, 3, generator=g) * torch.tensor([2.0, 50.0, 20.0])
    return Data(x=x, edge_index=edge_index, edge_weight=weight, num_nodes=groups,
                y=torch.rand(1, len(target_names()), generator=g), feature_set="driple", vocab_digest="bench")


def zoo_graphs(names: list[str], groups: int, count: int) -> list[Data]:
    from driple.graph.build import build_zoo_input

    graphs = []
    for i in range(count):
        data = build_zoo_input(names[i % len(names)], groups=groups, strategy="cpu-ddp-w2-lo")
        data.y = torch.rand(1, len(target_names()))
        graphs.append(data)
        if i + 1 >= len(names):  # same graph again: the builder is deterministic
            graphs += [copy.copy(graphs[j % len(names)]) for j in range(i + 1, count)]
            break
    return graphs


class ReferenceInspector(torch.nn.Module):
    """The inspector's weights run through :func:`reference_forward` (the baseline path)."""

    def __init__(self, model: Inspector):
        super().__init__()
        self.model = model

    def forward(self, x, edge_index, edge_weight=None, batch=None, batch_size=None, graph_attr=None):
        return reference_forward(self.model, x, edge_index, edge_weight, batch, batch_size,
                                 graph_attr)


def baseline_predict(predictor: TrainedInspector, graphs: list, batch_size: int) -> np.ndarray:
    """:meth:`TrainedInspector.predict` as it was: PyG DataLoader + :class:`ReferenceInspector`."""
    from torch_geometric.loader import DataLoader

    model = ReferenceInspector(predictor.model).eval()
    with torch.no_grad():
        outs = [run_batch(model, b) for b in DataLoader(predictor.prepare(graphs),
                                                         batch_size=batch_size)]
    return predictor.target_scaler.inverse_transform(torch.cat(outs).double().numpy())


@contextlib.contextmanager
def baseline_loop(active: bool):
    """During the baseline's training, :func:`fit` does not flush denormals (it did not)."""
    saved = train_module.flush_denormals
    if active:
        train_module.flush_denormals = contextlib.nullcontext
    try:
        yield
    finally:
        train_module.flush_denormals = saved


class Clock:
    """Wall and process CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bench(graphs: list[Data], repeats: int, hidden: int, batch_size: int, epochs: int,
          predict_batch: int, baseline: bool) -> None:
    names = ["op_freq", "tensor_mb", "n_ops"]
    torch.manual_seed(0)
    predictor = TrainedInspector(Inspector(3, hidden_channels=hidden, num_repeats=repeats),
                          FeatureScaler(names).fit(graphs),
                          TargetScaler().fit(torch.cat([g.y for g in graphs]).numpy()),
                          {"feature_set": "driple", "vocab_digest": graphs[0].vocab_digest})
    prepared = predictor.prepare(graphs)
    options = TrainOptions(epochs=epochs, patience=epochs, batch_size=batch_size)
    n = len(graphs) * epochs
    runs = [("scratch", False), ("paper", False), ("paper", True), ("mlp", False), ("mlp", True)]
    if baseline:
        runs.insert(0, ("baseline", False))
    for scheme, cache in runs:
        model = copy.deepcopy(predictor.model)
        if scheme == "baseline":
            model = ReferenceInspector(model)
        elif scheme != "scratch":
            freeze_for_transfer(model, scheme)
        trained, data, once = model, prepared, 0.0
        if cache:  # the frozen prefix once per graph, timed apart
            with Clock() as c0:
                trained, data = cache_frozen(model, prepared, scheme)
            once = c0.wall
        with Clock() as c, baseline_loop(scheme == "baseline"):
            fit(trained, data, data[:batch_size], options, progress=False)
        label = f"{scheme}{' cached' if cache else ''}"
        extra = f" + {once:.2f} s once for the prefix" if cache else ""
        print(f"  train {label:14s} {n / c.wall:7.1f} graphs/s wall  {n / c.cpu:7.1f} graphs/s cpu"
              f"   ({c.wall / epochs:.2f} s per epoch of {len(graphs)} graphs{extra})")

    def latency(predict, batch: list[Data], rounds: int) -> tuple[float, float]:
        walls, cpus = [], []
        predict(batch)  # warm-up
        for _ in range(rounds):
            with Clock() as c:
                predict(batch)
            walls.append(c.wall)
            cpus.append(c.cpu)
        return statistics.median(walls), statistics.median(cpus)

    batch = graphs[:predict_batch]
    paths = [("new", predictor.predict)]  # its default batching
    if baseline:
        paths.insert(0, ("baseline", lambda b: baseline_predict(predictor, b, len(b))))
        assert np.allclose(paths[0][1](batch), paths[1][1](batch), rtol=1e-4, atol=1e-5)
    for label, predict in paths:
        wall, cpu = latency(predict, graphs[:1], 30)
        print(f"  predict 1 graph ({label:8s})  {1e3 * wall:7.1f} ms wall  {1e3 * cpu:7.1f} ms cpu")
    for label, predict in paths:
        wall, cpu = latency(predict, batch, 5)
        print(f"  predict {len(batch)} graphs ({label:8s}) {len(batch) / wall:7.1f} graphs/s wall  "
              f"{len(batch) / cpu:7.1f} graphs/s cpu  ({1e3 * wall:.0f} ms per call)")
