"""Traced step → networkx op graph: one node per ATen op that does work.

Bookkeeping nodes (``getitem``, ``detach``, aliases, profiler markers) are contracted: their
inputs are wired straight to their users. Inputs (parameters, buffers, the batch, optimizer
state) are not ops and are dropped. Every op node carries:

- ``op``: ATen op name without namespace/overload (``"addmm"``), or ``"comm.<kind>"``
- ``phase``: ``"forward"`` (up to the loss), ``"backward"``, ``"optimizer"`` or ``"comm"``
- ``out_bytes``, ``out_numel``: bytes and elements of the op's tensor outputs (the paper's
  *tensor size*)
- ``in_bytes``: bytes of its tensor inputs
- ``flops``: floating-point operations (torch's flop formulas for matmul/conv/attention; one
  per output element otherwise)
- ``view``: the op returns a view of an input (``view``, ``t``, ``transpose``, ``expand``,
  ``slice``, ...: its schema aliases its output to an input): no arithmetic and no memory
  traffic at run time, only a new shape over the same storage; the graph-level features
  (:mod:`driple.graph.summary_features`) leave such ops out of the work counts
"""
from __future__ import annotations

import operator
from typing import Any

import networkx as nx
import torch

from driple.graph.trace import OpNode, TracedStep

_CONTRACT = {"detach", "alias", "lift_fresh", "lift_fresh_copy", "getitem"}
_DROP_PREFIX = ("profiler.",)
_NAMES: dict[Any, str] = {}


def op_name(target: Any) -> str:
    """Short op type of a traced op's target: ``aten.addmm.default`` → ``"addmm"``."""
    name = _NAMES.get(target)
    if name is None:
        if target is operator.getitem:
            name = "getitem"
        else:
            packet = getattr(target, "overloadpacket", None)
            name = str(packet) if packet is not None else getattr(target, "__name__", str(target))
            name = name[5:] if name.startswith("aten.") else name
        _NAMES[target] = name
    return name


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def tensor_bytes(value: Any) -> int:
    """Bytes of all tensors in ``value`` (a tensor or nested tuple/list of them)."""
    return sum(t.numel() * t.element_size() for t in _tensors(value))


def _op_nodes(nodes: list[OpNode], on_op) -> dict[OpNode, tuple[str, ...]]:
    """Walk traced ``nodes``, contracting bookkeeping ops; call ``on_op(node, name, inputs)`` per op.

    ``inputs`` are the op-graph names of the op's producers. Returns the node → op-graph
    names map (a contracted node stands for its producers; placeholders stand for nothing).
    """
    sources: dict[OpNode, tuple[str, ...]] = {}
    for node in nodes:
        if node.op != "call_function":
            sources[node] = ()
            continue
        name = op_name(node.target)
        inputs = node.all_input_nodes
        if len(inputs) == 1:
            ins = sources[inputs[0]]
        else:
            ins = tuple(dict.fromkeys(s for a in inputs for s in sources[a]))
        if name.startswith(_DROP_PREFIX):
            sources[node] = ()
        elif name in _CONTRACT:
            sources[node] = ins
        else:
            sources[node] = (on_op(node, name, ins),)
    return sources


def _attrs(node: OpNode, name: str, phase: str) -> dict:
    return {
        "op": name,
        "phase": phase,
        "out_bytes": node.out_bytes,
        "out_numel": node.out_numel,
        "in_bytes": sum(a.out_bytes for a in node.all_input_nodes),
        "flops": node.flops,
        "view": bool(getattr(node.target, "is_view", False)),
    }


def _aliases(nodes: list[OpNode], roots: dict[OpNode, int]) -> dict[OpNode, int]:
    """Map nodes that are a root placeholder or a contracted view of one to the root's index."""
    alias = dict(roots)
    for node in nodes:
        if node.op == "call_function" and node.all_input_nodes and node.all_input_nodes[0] in alias \
                and op_name(node.target) in _CONTRACT:
            alias[node] = alias[node.all_input_nodes[0]]
    return alias


def build_op_graph(traced: TracedStep) -> nx.DiGraph:
    """The op-level DiGraph of a traced step (see module docstring for node attributes)."""
    nodes = traced.graph_module.nodes
    index = {n: i for i, n in enumerate(nodes)}
    loss_i = index[traced.loss_node]
    graph = nx.DiGraph()
    param_alias = _aliases(nodes, {p: i for i, p in enumerate(traced.param_nodes)})
    param_users: list[list[str]] = [[] for _ in traced.param_nodes]
    add_node, add_edge = graph.add_node, graph.add_edge

    def add(node, name, ins):
        add_node(node.name, **_attrs(node, name, "forward" if index[node] <= loss_i else "backward"))
        for s in ins:
            add_edge(s, node.name)
        for a in node.all_input_nodes:
            if a in param_alias:
                param_users[param_alias[a]].append(node.name)
        return node.name

    sources = _op_nodes(nodes, add)
    graph.graph["sources"] = {n.name: s for n, s in sources.items()}
    if traced.update is not None:
        _add_updates(graph, traced, param_users)
    graph.graph["param_users"] = param_users  # per trainable parameter: ops that read it
    return graph


def _add_updates(graph: nx.DiGraph, traced: TracedStep, param_users: list[list[str]]) -> None:
    """Replicate the optimizer's per-kind update template once per parameter.

    Sizes and FLOPs of template ops whose output has the representative's element count are
    scaled to the parameter's; scalar bookkeeping (e.g. Adam's step count) is copied as is.
    """
    tpl = traced.update
    nodes = tpl.graph_module.nodes
    n_reps = len(tpl.param_nodes)
    roots = {**{p: r for r, p in enumerate(tpl.param_nodes)}, **{g: r for r, g in enumerate(tpl.grad_nodes)}}
    owner: dict[OpNode, int] = dict(roots)  # node -> representative it works for
    template: list[list[tuple]] = [[] for _ in range(n_reps)]  # per rep: (name, attrs, ins, reads)
    param_alias = _aliases(nodes, {p: r for r, p in enumerate(tpl.param_nodes)})
    grad_alias = _aliases(nodes, {g: r for r, g in enumerate(tpl.grad_nodes)})
    for node in nodes:  # a state placeholder belongs to the rep whose ops first read it
        if node.op == "call_function":
            reps = {owner[a] for a in node.all_input_nodes if a in owner}
            if reps:
                owner[node] = min(reps)
                for a in node.all_input_nodes:
                    owner.setdefault(a, owner[node])

    def add(node, name, ins):
        r = owner.get(node)
        if r is not None:
            template[r].append((node.name, _attrs(node, name, "optimizer"), ins,
                                any(a in param_alias for a in node.all_input_nodes),
                                any(a in grad_alias for a in node.all_input_nodes)))
        return node.name

    _op_nodes(nodes, add)
    grad_ops = {}
    for i, r in enumerate(tpl.rep_of):
        if r is None:
            continue
        numel = int(torch.Size(traced.param_shapes[i]).numel())
        scale = numel / max(tpl.rep_numel[r], 1)
        grads = grad_ops.setdefault(i, tuple(n for n in resolve(graph, traced.grad_nodes[i]) if n in graph))
        for name, attrs, ins, reads_param, reads_grad in template[r]:
            new = f"{name}__p{i}"
            a = dict(attrs)
            if scale != 1 and a["out_numel"] == tpl.rep_numel[r]:  # param-shaped output
                a["out_numel"] = numel
                a["out_bytes"] = int(a["out_bytes"] * scale)
                a["in_bytes"] = int(a["in_bytes"] * scale)
                a["flops"] = int(a["flops"] * scale)
            graph.add_node(new, **a)
            graph.add_edges_from((f"{s}__p{i}", new) for s in ins)
            if reads_grad:
                graph.add_edges_from((g, new) for g in grads)
            if reads_param:
                param_users[i].append(new)


def resolve(graph: nx.DiGraph, fx_node: OpNode | None) -> tuple[str, ...]:
    """The op-graph nodes a traced node stands for (a contracted node maps to its producers)."""
    if fx_node is None:
        return ()
    return tuple(graph.graph["sources"].get(fx_node.name, ()))
