"""Traced fx graph → networkx op graph: one node per ATen op that does work.

Bookkeeping nodes (``getitem``, ``detach``, aliases, profiler markers) are contracted: their
inputs are wired straight to their users. Inputs (parameters, buffers, the batch, optimizer
state) are not ops and are dropped. Every op node carries:

- ``op``: ATen op name without namespace/overload (``"addmm"``), or ``"comm.<kind>"``
- ``phase``: ``"forward"`` (up to the loss), ``"backward"``, ``"optimizer"`` or ``"comm"``
- ``out_bytes``: bytes of the op's tensor outputs (the paper's *tensor size*)
- ``in_bytes``: bytes of its tensor inputs
- ``flops``: floating-point operations (torch's flop formulas for matmul/conv/attention; one
  per output element otherwise)
"""
from __future__ import annotations

import operator
from typing import Any

import networkx as nx
import torch
from torch.utils.flop_counter import flop_registry

from driple.graph.trace import TracedStep

_CONTRACT = {"detach", "alias", "lift_fresh", "lift_fresh_copy", "getitem"}
_DROP_PREFIX = ("profiler.",)


def op_name(target: Any) -> str:
    """Short op type of an fx call_function target: ``aten.addmm.default`` → ``"addmm"``."""
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    name = str(packet) if packet is not None else getattr(target, "__name__", str(target))
    return name[5:] if name.startswith("aten.") else name


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def tensor_bytes(value: Any) -> int:
    """Bytes of all tensors in ``value`` (a tensor or nested tuple/list of them)."""
    return sum(t.numel() * t.element_size() for t in _tensors(value))


def _flops(node: torch.fx.Node) -> int:
    out = node.meta.get("val")
    formula = flop_registry.get(getattr(node.target, "overloadpacket", None))
    if formula is not None:
        args = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in node.args]
        kwargs = {k: (v.meta.get("val") if isinstance(v, torch.fx.Node) else v) for k, v in node.kwargs.items()}
        try:
            return int(formula(*args, out_val=out, **kwargs))
        except Exception:  # noqa: BLE001 — an unusual signature; fall back to elementwise count
            pass
    return sum(t.numel() for t in _tensors(out))


def build_op_graph(traced: TracedStep) -> nx.DiGraph:
    """The op-level DiGraph of a traced step (see module docstring for node attributes)."""
    nodes = list(traced.graph_module.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    grad_idx = [index[g] for g in traced.grad_nodes if g is not None]
    loss_i = index[traced.loss_node]
    backward_end = max(grad_idx) if grad_idx else loss_i

    graph = nx.DiGraph()
    sources: dict[torch.fx.Node, tuple[str, ...]] = {}  # fx node -> op-graph nodes it stands for
    param_alias = {p: i for i, p in enumerate(traced.param_nodes)}  # fx node -> parameter index
    param_users: list[list[str]] = [[] for _ in traced.param_nodes]
    for node in nodes:
        if node.op != "call_function":
            sources[node] = ()
            continue
        name = op_name(node.target)
        ins = tuple(dict.fromkeys(s for a in node.all_input_nodes for s in sources.get(a, ())))
        if name.startswith(_DROP_PREFIX):
            sources[node] = ()
            continue
        if name in _CONTRACT:
            sources[node] = ins
            if node.all_input_nodes and node.all_input_nodes[0] in param_alias:
                param_alias[node] = param_alias[node.all_input_nodes[0]]
            continue
        for a in node.all_input_nodes:
            if a in param_alias:
                param_users[param_alias[a]].append(node.name)
        i = index[node]
        phase = "forward" if i <= loss_i else ("backward" if i <= backward_end else "optimizer")
        graph.add_node(
            node.name,
            op=name,
            phase=phase,
            out_bytes=tensor_bytes(node.meta.get("val")),
            in_bytes=sum(tensor_bytes(a.meta.get("val")) for a in node.all_input_nodes),
            flops=_flops(node),
        )
        graph.add_edges_from((s, node.name) for s in ins)
        sources[node] = (node.name,)
    graph.graph["sources"] = {n.name: sources[n] for n in nodes}
    graph.graph["param_users"] = param_users  # per trainable parameter: ops that read it
    return graph


def resolve(graph: nx.DiGraph, fx_node: torch.fx.Node | None) -> tuple[str, ...]:
    """The op-graph nodes an fx node stands for (a contracted node maps to its producers)."""
    if fx_node is None:
        return ()
    return tuple(graph.graph["sources"].get(fx_node.name, ()))
