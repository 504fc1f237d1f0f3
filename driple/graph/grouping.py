"""Group the op graph into communities so the inspector sees a small graph of fixed-ish size.

Driple groups the largest (weakly) connected component of the op graph with the asynchronous
fluid-communities algorithm (networkx ``asyn_fluidc``), seeded so the result is reproducible.

Policies (how many groups a graph with ``n`` ops gets):

- ``"uniform"`` — ``M`` groups for every graph (the public Driple code: ``k=100``).
- ``"proportional"`` — the count grows with the log of the graph's size:
  ``round(M * log10(n) / log10(n_ref))`` clipped to ``[2, n]``, where ``n_ref`` is the typical op
  count of the corpus (``reference_nodes``). Our reading of the paper's proportional policy.
- ``"none"`` — no grouping: every op is its own group (the design study's baseline).

A graph with fewer ops than the requested groups gets one group per op (never an error), so
``n_groups_`` may be smaller than ``M``. Ops outside the largest component are left out (as in
Driple) and counted in ``dropped_``.
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np

from driple.errors import DripleError

POLICIES = ("uniform", "proportional", "none")


class FluidGrouper:
    """Assign every op of the largest connected component to exactly one group.

    Parameters are stored as given (scikit-learn style); :meth:`fit` sets ``labels_`` (dict
    op → group id in ``0..n_groups_-1``), ``n_groups_``, ``nodes_`` (the grouped ops, in graph
    order) and ``dropped_`` (ops outside the largest component).
    """

    def __init__(self, n_groups: int = 100, policy: str = "uniform", seed: int = 42,
                 reference_nodes: int = 1000):
        self.n_groups = n_groups
        self.policy = policy
        self.seed = seed
        self.reference_nodes = reference_nodes

    def target_groups(self, n: int) -> int:
        """How many groups a component of ``n`` ops gets under this policy."""
        if self.policy == "none":
            return n
        if self.policy == "proportional":
            m = round(self.n_groups * math.log10(max(n, 2)) / math.log10(max(self.reference_nodes, 10)))
            return max(1, min(n, max(2, m)))
        return max(1, min(n, self.n_groups))

    def fit(self, graph: nx.DiGraph) -> FluidGrouper:
        if self.policy not in POLICIES:
            raise DripleError(f"unknown grouping policy {self.policy!r}; use one of {', '.join(POLICIES)}")
        if self.n_groups < 1:
            raise DripleError("the number of groups must be at least 1")
        if graph.number_of_nodes() == 0:
            raise DripleError("the traced graph has no operations to group")
        undirected = graph.to_undirected(as_view=True)
        largest = max(nx.connected_components(undirected), key=len)
        self.nodes_ = [n for n in graph.nodes if n in largest]
        self.dropped_ = graph.number_of_nodes() - len(self.nodes_)
        k = self.target_groups(len(self.nodes_))
        if k >= len(self.nodes_):
            self.labels_ = {n: i for i, n in enumerate(self.nodes_)}
        else:
            sub = nx.Graph(undirected.subgraph(self.nodes_))
            communities = nx.community.asyn_fluidc(sub, k, seed=self.seed)
            # Number groups by their first op in graph order, so ids follow the data flow.
            order = {n: i for i, n in enumerate(self.nodes_)}
            groups = sorted((sorted(c, key=order.__getitem__) for c in communities), key=lambda c: order[c[0]])
            self.labels_ = {n: g for g, members in enumerate(groups) for n in members}
        self.n_groups_ = len(set(self.labels_.values()))
        return self

    def aggregate(self, graph: nx.DiGraph, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Sum per-op ``values`` (arrays in ``graph`` node order) over each group → ``[n_groups_]``."""
        pos = {n: i for i, n in enumerate(graph.nodes)}
        idx = np.array([pos[n] for n in self.nodes_])
        gid = np.array([self.labels_[n] for n in self.nodes_])
        return {k: np.bincount(gid, weights=v[idx], minlength=self.n_groups_) for k, v in values.items()}

    def group_edges(self, graph: nx.DiGraph) -> tuple[np.ndarray, np.ndarray]:
        """Undirected edges between distinct groups (``[2, E]``, both directions) and their op-edge counts."""
        counts: dict[tuple[int, int], int] = {}
        for u, v in graph.edges:
            gu, gv = self.labels_.get(u), self.labels_.get(v)
            if gu is None or gv is None or gu == gv:
                continue
            key = (min(gu, gv), max(gu, gv))
            counts[key] = counts.get(key, 0) + 1
        if not counts:
            return np.zeros((2, 0), dtype=np.int64), np.zeros(0)
        pairs = np.array(sorted(counts), dtype=np.int64).T
        weights = np.array([counts[k] for k in sorted(counts)], dtype=np.float64)
        edge_index = np.concatenate([pairs, pairs[::-1]], axis=1)
        return edge_index, np.concatenate([weights, weights])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_groups={self.n_groups}, policy={self.policy!r}, seed={self.seed})"
