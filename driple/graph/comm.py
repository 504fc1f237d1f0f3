"""Communication nodes of a distributed strategy, added to a single-process op graph.

A single-process trace has no communication; a distributed step does. Each strategy's
registration (:mod:`driple.strategies`) names its hook here (:func:`ddp_comm`, :func:`ps_comm`,
:func:`fsdp_comm`):

- **DDP** (all-reduce): gradients are grouped into buckets exactly as torch's Reducer does after
  its first iteration — in gradient-ready order (the order gradients appear in the backward
  trace), first bucket capped at 1 MiB, later ones at 25 MiB, using torch's own
  ``_compute_bucket_assignment_by_size``. One ``comm.allreduce`` node per bucket, fed by the
  gradients in it and feeding the optimizer ops that read them; buckets complete in order.
- **Parameter server**: parameters are placed on P servers by greedy load balancing (largest
  first onto the least-loaded server; :func:`driple.strategies.ps.ps_shards`). Per server one ``comm.push`` (the gradients it owns) →
  the update of its parameters → one ``comm.pull`` (the fresh parameters).
- **FSDP** (sharded): parameters are grouped into units by :func:`driple.strategies.fsdp.fsdp_units`.
  Per unit a ``comm.allgather`` before the first forward op that reads its parameters, another
  before its backward ops (not for the root unit, which stays gathered), and a
  ``comm.reducescatter`` fed by its gradients and feeding their update; all-gathers in order.

Node ``out_bytes`` of a comm node is the bytes one worker moves for it per step in each
direction it uses (ring all-reduce over W workers sends and receives 2(W-1)/W of the bucket; a
push sends its shard, a pull receives it; an all-gather (W-1)/W of the unit, a reduce-scatter
as much over NCCL and what an all-reduce moves over gloo, :data:`REDUCE_SCATTER_AS_ALLREDUCE`);
``bucket_bytes`` is the payload.
"""
from __future__ import annotations

import networkx as nx
import torch

from driple.graph.opgraph import resolve
from driple.graph.trace import TracedStep
from driple.strategies.fsdp import fsdp_units
from driple.strategies.ps import ps_shards

#: DDP defaults in torch ≥ 2.0 (bytes): first bucket and every later bucket.
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
DDP_BUCKET_BYTES = 25 * 1024 * 1024


def ready_order(traced: TracedStep) -> list[int]:
    """Indices of trainable parameters in the order their gradients are produced."""
    nodes = {n: i for i, n in enumerate(traced.graph_module.graph.nodes)}
    have = [i for i, g in enumerate(traced.grad_nodes) if g is not None]
    return sorted(have, key=lambda i: nodes[traced.grad_nodes[i]])


def ddp_buckets(
    shapes: list[tuple[int, ...]],
    dtypes: list[torch.dtype],
    first_cap: int = DDP_FIRST_BUCKET_BYTES,
    cap: int = DDP_BUCKET_BYTES,
) -> list[list[int]]:
    """Bucket tensors given in gradient-ready order; returns lists of positions in that order."""
    import torch.distributed as dist

    if not shapes:
        return []
    metas = [torch.empty(s, dtype=d, device="meta") for s, d in zip(shapes, dtypes)]
    limits = [first_cap, cap] if first_cap < cap else [cap]
    buckets, _ = dist._compute_bucket_assignment_by_size(
        metas, limits, [False] * len(metas), list(range(len(metas)))
    )
    return [list(b) for b in buckets]


def _grad_ops(graph: nx.DiGraph, traced: TracedStep, i: int) -> tuple[str, ...]:
    return tuple(n for n in resolve(graph, traced.grad_nodes[i]) if n in graph)


def _optimizer_users(graph: nx.DiGraph, producers: tuple[str, ...]) -> set[str]:
    return {
        u for p in producers for u in graph.successors(p) if graph.nodes[u]["phase"] == "optimizer"
    }


def _route_gradient(graph: nx.DiGraph, traced: TracedStep, i: int, node: str) -> None:
    """Parameter ``i``'s gradient ops feed ``node``, and its update waits for ``node`` instead."""
    grads = _grad_ops(graph, traced, i)
    for user in _optimizer_users(graph, grads):
        for g in grads:
            if graph.has_edge(g, user):
                graph.remove_edge(g, user)
        graph.add_edge(node, user)
    graph.add_edges_from((g, node) for g in grads)


def add_ddp_comm(graph: nx.DiGraph, traced: TracedStep, workers: int) -> list[dict]:
    """Add one ``comm.allreduce`` node per DDP bucket; returns the buckets (params, bytes)."""
    order = ready_order(traced)
    sizes = traced.param_bytes
    buckets = ddp_buckets([traced.param_shapes[i] for i in order], [traced.param_dtypes[i] for i in order])
    ring = 2.0 * (workers - 1) / workers if workers > 1 else 0.0
    out, prev = [], None
    for b, positions in enumerate(buckets):
        params = [order[p] for p in positions]
        payload = sum(sizes[i] for i in params)
        name = f"allreduce_{b}"
        graph.add_node(
            name, op="comm.allreduce", phase="comm", out_bytes=int(round(ring * payload)),
            in_bytes=payload, flops=payload // 4 if workers > 1 else 0, bucket_bytes=payload,
        )
        for i in params:
            _route_gradient(graph, traced, i, name)  # the optimizer waits for the reduced grad
        if prev is not None:
            graph.add_edge(prev, name)
        prev = name
        out.append({"params": params, "bytes": payload})
    return out


def add_ps_comm(graph: nx.DiGraph, traced: TracedStep, servers: int) -> list[dict]:
    """Add ``comm.push``/``comm.pull`` per server; returns the shards (params, bytes)."""
    sizes = traced.param_bytes
    owner = ps_shards(sizes, servers)
    users = graph.graph["param_users"]
    out = []
    for s in range(servers):
        params = [i for i, o in enumerate(owner) if o == s]
        payload = sum(sizes[i] for i in params)
        push, pull = f"push_{s}", f"pull_{s}"
        graph.add_node(push, op="comm.push", phase="comm", out_bytes=payload, in_bytes=payload,
                       flops=0, bucket_bytes=payload)
        graph.add_node(pull, op="comm.pull", phase="comm", out_bytes=payload, in_bytes=0,
                       flops=0, bucket_bytes=payload)
        for i in params:
            _route_gradient(graph, traced, i, push)
            updates = [u for u in users[i] if graph.nodes[u]["phase"] == "optimizer"]
            if updates:
                graph.add_edge(updates[-1], pull)
        out.append({"params": params, "bytes": payload})
    return out


#: Backends whose reduce-scatter sends and receives what an all-reduce of its input does, 2(W-1)/W
#: of it, not (W-1)/W: on 174 FSDP jobs over gloo (torch 2.13) a worker sent 1.5-2.1x its
#: model's parameter bytes per step, within 0.2 % (mean; 4 % at most) of two gathers and an
#: all-reduce-sized reduce-scatter per unit, and 27 % above a ring reduce-scatter's bytes.
REDUCE_SCATTER_AS_ALLREDUCE = frozenset({"gloo"})


def add_fsdp_comm(graph: nx.DiGraph, traced: TracedStep, workers: int, backend: str = "gloo") -> list[dict]:
    """Add the all-gathers and reduce-scatter of every FSDP unit, each with the bytes one worker
    moves over ``backend``; returns the units (params, bytes)."""
    sizes = traced.param_bytes
    users = graph.graph["param_users"]
    share = (workers - 1) / workers if workers > 1 else 0.0
    scatter_share = share * (2 if backend in REDUCE_SCATTER_AS_ALLREDUCE else 1)
    out, prev = [], None
    for u, (unit, params) in enumerate(fsdp_units(list(traced.param_names))):
        payload = sum(sizes[i] for i in params)
        moved = int(round(share * payload))
        readers = {ph: [n for i in params for n in users[i] if graph.nodes[n]["phase"] == ph]
                   for ph in ("forward", "backward")}
        gathers = [("forward", f"allgather_fwd_{u}")]
        if unit:  # the root stays gathered from forward to backward
            gathers.append(("backward", f"allgather_bwd_{u}"))
        for phase, name in gathers:
            graph.add_node(name, op="comm.allgather", phase="comm", out_bytes=moved,
                           in_bytes=payload // max(workers, 1), flops=0, bucket_bytes=payload)
            graph.add_edges_from((name, r) for r in dict.fromkeys(readers[phase]))
        scatter = f"reducescatter_{u}"
        graph.add_node(scatter, op="comm.reducescatter", phase="comm", out_bytes=int(round(scatter_share * payload)),
                       in_bytes=payload, flops=payload // 4 if workers > 1 else 0, bucket_bytes=payload)
        for i in params:
            _route_gradient(graph, traced, i, scatter)  # the update waits for its shard of the grad
        if prev is not None:
            graph.add_edge(prev, f"allgather_fwd_{u}")
        prev = f"allgather_fwd_{u}"
        out.append({"params": params, "bytes": payload})
    return out


def ddp_comm(graph: nx.DiGraph, traced: TracedStep, setting) -> list[dict]:
    """The DDP strategy's hook: :func:`add_ddp_comm` for ``setting.workers``."""
    return add_ddp_comm(graph, traced, setting.workers)


def ps_comm(graph: nx.DiGraph, traced: TracedStep, setting) -> list[dict]:
    """The parameter-server strategy's hook: :func:`add_ps_comm` for ``setting.servers``."""
    return add_ps_comm(graph, traced, setting.servers)


def fsdp_comm(graph: nx.DiGraph, traced: TracedStep, setting) -> list[dict]:
    """The FSDP strategy's hook: :func:`add_fsdp_comm` for ``setting.workers`` over its device's backend."""
    from driple.hardware.devices import device_kind

    return add_fsdp_comm(graph, traced, setting.workers, device_kind(setting.device).collective_backend)
