"""Sharded data parallel (PyTorch FSDP2, ``torch.distributed.fsdp.fully_shard``): every worker
holds 1/W of the parameters, gradients and optimizer state. Before a unit computes, forward and
again backward, its parameters are all-gathered; after its backward its gradients are
reduce-scattered. Settings ``<device>-fsdp-w<N>-<network>``: no servers, always synchronous.

:func:`fsdp_units` is the one wrapping policy, per top-level block as ``fully_shard``
recommends: the graph builder's communication nodes, the memory simulator and the collector's
worker all use it, so graph and job agree. The root unit (parameters outside every block) is
gathered once per step: FSDP2 keeps the root unsharded from forward to backward.
"""
from __future__ import annotations

import re

from driple.strategies.registry import Strategy, WorkerMemory, register_strategy

#: A block inside a container: ``layers.3``, ``transformer.h.11``, ``0`` (a root Sequential).
_INDEXED = re.compile(r"^((?:[A-Za-z_]\w*\.){0,2}\d+)\.")


def unit_name(param_name: str) -> str:
    """The unit a parameter belongs to: the first indexed block on its path (``layers.3`` of
    ``layers.3.attn.weight``, within three levels), else its top-level child (``fc`` of
    ``fc.weight``), else the root (``""``) for a parameter of the model itself."""
    m = _INDEXED.match(param_name)
    if m:
        return m.group(1)
    head, dot, _ = param_name.partition(".")
    return head if dot else ""


def fsdp_units(param_names: list[str]) -> list[list[int]]:
    """Parameter indices grouped by unit, in order of first appearance; the root's group
    (parameters outside every unit) last, when there is one."""
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(param_names):
        groups.setdefault(unit_name(name), []).append(i)
    root = groups.pop("", None)
    return [*groups.values(), *([root] if root else [])]


def unit_names(param_names: list[str]) -> list[str]:
    """The units' module names, in :func:`fsdp_units` order (``""``: the root)."""
    names = list(dict.fromkeys(unit_name(n) for n in param_names))
    return [n for n in names if n] + ([""] if "" in names else [])


FSDP = register_strategy(Strategy(
    name="fsdp",
    description="sharded data parallel",
    title="FSDP",
    ranks_id="w{workers}",
    graph_key="fsdp-w{workers}",
    comm="driple.graph.comm:fsdp_comm",
    worker="driple.collect.workers.fsdp",
    comm_units="sharded units",
    link_use="duplex",
    memory=WorkerMemory(units="driple.strategies.fsdp:fsdp_units"),
))
