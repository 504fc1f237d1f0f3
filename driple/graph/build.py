"""The input builder end to end: training step → op graph (+ communication) → groups → ``Data``.

``build_input`` is what schedulers and the inspector call; ``build_zoo_input`` does the same
for a zoo model by name. The returned :class:`torch_geometric.data.Data` has

- ``x`` ``[G, F]`` float32: per-group features (see :mod:`driple.graph.features`), raw units
  (the inspector scales them);
- ``edge_index`` ``[2, E]`` and ``edge_weight`` ``[E]``: undirected group adjacency and the
  number of op edges behind each group edge;
- ``graph_attr`` ``[1, len(GRAPH_ATTRS)]`` float64: graph-level quantities for baselines;
- ``graph_features`` ``[1, len(GRAPH_FEATURES)]`` float64: the graph-level features of
  :mod:`driple.graph.summary_features` (FLOPs, memory traffic, parameter, activation and
  communicated bytes, messages, batch size, workers, servers, optimizer), the hybrid
  inspector's inputs and what its physical priors are computed from;
- ``feature_set``, ``num_groups``, ``grouping_key`` (policy, M and seed, see
  :func:`~driple.graph.grouping.grouping_key`), ``summary`` (a plain dict of everything above
  and timings).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import torch
from torch import nn

from driple.errors import DripleError
from driple.graph.features import OpVocabulary, default_vocabulary, feature_names, node_table
from driple.graph.grouping import DEFAULT_GROUPS, DEFAULT_POLICY, DEFAULT_SEED, FluidGrouper, grouping_key
from driple.graph.opgraph import build_op_graph
from driple.graph.summary_features import feature_vector, graph_features
from driple.graph.trace import trace_training_step
from driple.settings import Setting, parse_setting
from driple.strategies import find_strategy, get_strategy, strategy_names

#: Graph-level attributes (units): trainable parameters (count), FLOPs per step (GFLOP),
#: forward output bytes (MB), bytes one worker sends per step (MB), batch size, ops in the graph.
GRAPH_ATTRS = ("params", "gflops", "activation_mb", "comm_mb", "batch_size", "n_ops")


@dataclass
class GraphSummary:
    """What the builder made, with the time each stage took (seconds)."""

    ops: int
    edges: int
    params: int
    gflops: float
    activation_mb: float
    comm_mb: float
    comm_nodes: int
    batch_size: int
    groups: int
    dropped_ops: int
    strategy: str
    workers: int
    servers: int
    optimizer: str
    trace_s: float
    graph_s: float
    group_s: float
    total_s: float
    buckets_mb: list[float] = field(default_factory=list)
    graph_features: dict = field(default_factory=dict)  # driple.graph.summary_features

    def to_dict(self) -> dict:
        return asdict(self)


def _resolve_strategy(strategy: Any, workers: int | None, servers: int | None) -> Setting:
    if isinstance(strategy, Setting):
        return strategy
    if isinstance(strategy, str) and "-" in strategy:
        return parse_setting(strategy)
    if strategy in (None, "none", "single"):
        return Setting(strategy="ddp", workers=1)
    known = find_strategy(strategy)
    if known is not None:  # servers only where the strategy has them; 0 is refused by Setting, not replaced
        return Setting(strategy=known.name, workers=2 if workers is None else workers,
                       servers=(1 if servers is None else servers) if known.servers else 0)
    names = ", ".join(repr(n) for n in (*strategy_names(), "none"))
    raise DripleError(f"unknown strategy {strategy!r}; use {names} or a setting id like 'cpu-ddp-w2-lo'")


def op_graph_for(model: nn.Module, example_batch: Any, loss_fn=None, optimizer: Any = "sgd",
                 strategy: Any = "ddp", workers: int | None = None, servers: int | None = None):
    """Trace the step and add communication (the setting's strategy's hook, none for a single
    process); returns ``(op graph, traced step, setting, comm)``."""
    setting = _resolve_strategy(strategy, workers, servers)
    traced = trace_training_step(model, example_batch, loss_fn=loss_fn, optimizer=optimizer)
    graph = build_op_graph(traced)
    comm = [] if setting.single_process else get_strategy(setting.strategy).add_comm(graph, traced, setting)
    return graph, traced, setting, comm


def build_input(
    model: nn.Module,
    example_batch: Any,
    loss_fn=None,
    optimizer: Any = "sgd",
    strategy: Any = "ddp",
    workers: int | None = None,
    servers: int | None = None,
    groups: int = DEFAULT_GROUPS,
    grouping: str = DEFAULT_POLICY,
    features: str = "driple",
    seed: int = DEFAULT_SEED,
    vocabulary: OpVocabulary | None = None,
):
    """Build the inspector's input for one training step of ``model``.

    ``example_batch`` is ``(inputs, targets)`` (or just inputs); ``optimizer`` a name
    (``"sgd"``, ``"adam"``, ``"adamw"``), class, instance or ``params -> optimizer`` function;
    ``strategy`` a registered strategy's name (``"ddp"``, ``"ps"``; see :mod:`driple.strategies`),
    ``"none"`` or a setting id/:class:`Setting`.
    Returns a :class:`torch_geometric.data.Data` (see module docstring).
    """
    from torch_geometric.data import Data

    names = feature_names(features)
    t0 = time.perf_counter()
    graph, traced, setting, comm = op_graph_for(model, example_batch, loss_fn, optimizer,
                                                strategy, workers, servers)
    t1 = time.perf_counter()
    vocab = vocabulary or default_vocabulary()
    grouper = FluidGrouper(groups, policy=grouping, seed=seed, reference_nodes=vocab.reference_nodes).fit(graph)
    table = node_table(graph, vocab)
    agg = grouper.aggregate(graph, {k: table[k] for k in set(names) | {"n_ops"}})
    for k in names:  # phase columns are shares of the group's ops, not counts
        if k.startswith("share_"):
            agg[k] = agg[k] / np.maximum(agg["n_ops"], 1)
    x = np.stack([agg[k] for k in names], axis=1)
    edge_index, edge_weight = grouper.group_edges(graph)
    t2 = time.perf_counter()

    summary = summarize(graph, traced, setting, comm, grouper, t0, t1, t2)
    attrs = [summary.params, summary.gflops, summary.activation_mb, summary.comm_mb,
             summary.batch_size, summary.ops]
    return Data(
        x=torch.tensor(x, dtype=torch.float32),
        edge_index=torch.tensor(edge_index, dtype=torch.long),
        edge_weight=torch.tensor(edge_weight, dtype=torch.float32),
        graph_attr=torch.tensor([attrs], dtype=torch.float64),
        graph_features=torch.tensor([feature_vector(summary.graph_features)], dtype=torch.float64),
        num_nodes=grouper.n_groups_,
        feature_set=features,
        num_groups=grouper.n_groups_,
        vocab_digest=vocab.digest,
        grouping_key=grouping_key(groups, grouping, seed),
        summary={**summary.to_dict(), **_memory_summary(traced, setting, comm)},
    )


def _memory_summary(traced, setting, comm=()) -> dict:
    """The simulated memory of the step (:mod:`driple.graph.memory`): its true peak with the
    breakdown, the peak at the points the collector samples (``memory_sampled_mb``), and the
    level at those points over the step (``memory_cycle``, :mod:`driple.graph.memory_cycle`), and
    what the BLAS keeps on each code path measured (``memory_blas_mb``, :mod:`driple.hardware.blas`):
    the machine a prediction describes picks one."""
    from driple.graph.memory import simulate_both, step_parts
    from driple.graph.memory_cycle import memory_cycle
    from driple.hardware.blas import PATHS, kept_by_path

    strategy, workers = getattr(setting, "strategy", None) or "none", getattr(setting, "workers", 2)
    parts = step_parts(traced, strategy, workers)
    whole, seen = simulate_both(traced, strategy, workers, parts=parts)
    return {"memory_peak_mb": whole.peak_mb, "memory_phase": whole.phase,
            "memory_breakdown_mb": {k: v / 1e6 for k, v in whole.breakdown.items()},
            "memory_sampled_mb": seen.peak_mb, "memory_cycle": memory_cycle(traced, strategy, workers, parts=parts, comm=comm).to_dict(),
            "memory_blas_mb": {path: kept / 1e6 for path, kept in kept_by_path(traced, PATHS).items()}}


def summarize(graph: nx.DiGraph, traced, setting: Setting, comm: list[dict], grouper: FluidGrouper,
              t0: float, t1: float, t2: float) -> GraphSummary:
    ops = [d for _, d in graph.nodes(data=True)]
    is_comm = [d["phase"] == "comm" for d in ops]
    return GraphSummary(
        ops=graph.number_of_nodes(),
        edges=graph.number_of_edges(),
        params=traced.num_params,
        gflops=sum(d["flops"] for d, c in zip(ops, is_comm) if not c) / 1e9,
        activation_mb=sum(d["out_bytes"] for d in ops if d["phase"] == "forward") / 1e6,
        comm_mb=sum(d["out_bytes"] for d, c in zip(ops, is_comm) if c and d["op"] != "comm.pull") / 1e6,
        comm_nodes=sum(is_comm),
        batch_size=traced.batch_size,
        groups=grouper.n_groups_,
        dropped_ops=grouper.dropped_,
        strategy="none" if setting.single_process else setting.strategy,
        workers=setting.workers,
        servers=setting.servers,
        optimizer=traced.optimizer,
        trace_s=traced.seconds,
        graph_s=t1 - t0 - traced.seconds,
        group_s=t2 - t1,
        total_s=t2 - t0,
        buckets_mb=[c["bytes"] / 1e6 for c in comm],
        graph_features=graph_features(graph, traced.param_bytes, traced.batch_size, traced.optimizer,
                                      setting.workers, 0 if setting.single_process else setting.servers,
                                      comm),
    )


def build_zoo_input(name: str, batch_size: int | None = None, optimizer: str = "sgd",
                    strategy: Any = "ddp", workers: int | None = None, servers: int | None = None,
                    **kwargs):
    """:func:`build_input` for a job's model: a zoo name, or a user factory ``module:function`` /
    ``file.py:function`` (:mod:`driple.zoo.workload`); ``kwargs`` are its knobs or builder options.

    The model and its batch are built on the meta device where possible (shapes, no memory; see
    :func:`driple.zoo.workload.load_workload`): the trace reads only shapes, and the graph is the
    same."""
    from driple.zoo.workload import example_batch, load_workload

    builder_opts = {k: kwargs.pop(k) for k in ("groups", "grouping", "features", "seed", "vocabulary")
                    if k in kwargs}
    if batch_size is not None and int(batch_size) < 1:
        raise DripleError(f"batch size must be at least 1, not {batch_size}")
    wl = load_workload(name, batch_size, kwargs, shapes_only=True)
    data = build_input(wl.model, example_batch(wl, batch_size), loss_fn=wl.loss_fn, optimizer=optimizer,
                       strategy=strategy, workers=workers, servers=servers, **builder_opts)
    data.summary["model"] = getattr(wl, "name", None) or name.rpartition(":")[2]
    data.summary["family"] = getattr(wl, "family", None) or "user"
    return data
