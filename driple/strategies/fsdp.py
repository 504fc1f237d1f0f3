"""Sharded data parallel (PyTorch FSDP2, ``torch.distributed.fsdp.fully_shard``): every worker
holds 1/W of the parameters, gradients and optimizer state. Before a unit computes, forward and
again backward, its parameters are all-gathered; after its backward its gradients are
reduce-scattered. Settings ``<device>-fsdp-w<N>-<network>``: no servers, always synchronous.

:func:`fsdp_units` is the one wrapping policy, per block as ``fully_shard`` recommends (each
child of a ``ModuleList``/``Sequential``; the rest of the model is the root unit): the graph
builder's communication nodes, the memory simulator and the collector's worker all use it, so
graph and job agree. The root unit (parameters outside every block) is
gathered once per step: FSDP2 keeps the root unsharded from forward to backward.
"""
from __future__ import annotations

import re

from driple.strategies.registry import Strategy, WorkerMemory, register_strategy

#: A block inside a container: ``layers.3``, ``transformer.h.11``, ``0`` (a root Sequential).
_INDEXED = re.compile(r"^((?:[A-Za-z_]\w*\.){0,2}\d+)\.")


def unit_name(param_name: str) -> str:
    """The unit a parameter belongs to: the first indexed block on its path (``layers.3`` of
    ``layers.3.attn.weight``, ``0`` of a root ``Sequential``'s ``0.weight``; within three
    levels), else the root (``""``). Embeddings, heads and norms outside the blocks stay in the
    root, as FSDP's own recipe wraps them: a model often reads their weights outside their
    ``forward`` (positional tables sliced, tied output projections), which a unit of their own
    would leave sharded."""
    m = _INDEXED.match(param_name)
    return m.group(1) if m else ""


def fsdp_units(param_names: list[str]) -> list[tuple[str, list[int]]]:
    """``[(unit name, parameter indices), ...]`` in order of first appearance; the root's
    (``""``: parameters outside every block) last, when there is one."""
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(param_names):
        groups.setdefault(unit_name(name), []).append(i)
    root = groups.pop("", None)
    return [*groups.items(), *([("", root)] if root else [])]


def unit_names(param_names: list[str]) -> list[str]:
    """The units' module names, in :func:`fsdp_units` order (``""``: the root)."""
    return [name for name, _ in fsdp_units(param_names)]


FSDP = register_strategy(Strategy(
    name="fsdp",
    description="sharded data parallel",
    title="FSDP",
    ranks_id="w{workers}",
    graph_key="fsdp-w{workers}-{backend}",
    comm="driple.graph.comm:fsdp_comm",
    worker="driple.collect.workers.fsdp",
    comm_units="sharded units",
    link_use="duplex",
    memory=WorkerMemory(units="driple.strategies.fsdp:fsdp_units", runtime_modules=("torch._dynamo",),
                        sample_points="driple.graph.sharded_cycle:sharded_points"),
))
