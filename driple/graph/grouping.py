"""Group the op graph into communities so the inspector sees a small graph of fixed-ish size.

Driple groups the largest (weakly) connected component of the op graph with the asynchronous
fluid-communities algorithm (Parés et al. 2017, networkx ``asyn_fluidc``), seeded so the result
is reproducible. :func:`fluid_communities` is that algorithm step for step — same random draws,
same tie-breaking — on integer adjacency lists, with every vertex's neighbours in graph order.
networkx visits an undirected view of a DiGraph's neighbours in ``set`` order, which follows
string hashing, so its groups changed with ``PYTHONHASHSEED`` from one process to the next;
here they depend only on the graph (node and neighbour order) and the seed.

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
import random

import networkx as nx
import numpy as np

from driple.errors import DripleError

POLICIES = ("uniform", "proportional", "none")

# Defaults that shape every shipped graph. Inspectors record the options their graphs were
# built with (``builder`` in the checkpoint) and refuse graphs grouped otherwise, so changing
# one of these changes new graphs, never silently the input of a shipped inspector.
DEFAULT_GROUPS = 100  #: number of groups M (Driple's public code: ``k=100``)
DEFAULT_POLICY = "uniform"
DEFAULT_SEED = 42  #: seed of the fluid-communities draws


def grouping_key(groups: int, policy: str, seed: int) -> str:
    """One string for how a graph was grouped (policy, M, seed): graphs and inspectors compare it."""
    return f"{policy}-M{int(groups)}-seed{int(seed)}"


class FluidGrouper:
    """Assign every op of the largest connected component to exactly one group.

    Parameters are stored as given (scikit-learn style); :meth:`fit` sets ``labels_`` (dict
    op → group id in ``0..n_groups_-1``), ``n_groups_``, ``nodes_`` (the grouped ops, in graph
    order) and ``dropped_`` (ops outside the largest component).
    """

    def __init__(self, n_groups: int = DEFAULT_GROUPS, policy: str = DEFAULT_POLICY,
                 seed: int = DEFAULT_SEED, reference_nodes: int = 1000):
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
        names = list(graph.nodes)
        adjacency = _undirected_adjacency(graph, names)
        members = _largest_component(adjacency)
        self.nodes_ = [names[i] for i in members]
        self.dropped_ = len(names) - len(members)
        k = self.target_groups(len(members))
        if k >= len(members):
            self.labels_ = {n: i for i, n in enumerate(self.nodes_)}
        else:
            # Renumber the component 0..m-1 in graph order; neighbours stay in ascending order.
            local = {g: i for i, g in enumerate(members)}
            sub = [[local[j] for j in adjacency[g]] for g in members]
            community = fluid_communities(sub, k, seed=self.seed)
            # Number groups by their first op in graph order, so ids follow the data flow.
            first: dict[int, int] = {}
            for i, c in enumerate(community):
                first.setdefault(c, len(first))
            self.labels_ = {n: first[c] for n, c in zip(self.nodes_, community)}
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


def _undirected_adjacency(graph: nx.Graph, names: list) -> list[list[int]]:
    """Per node (index in ``names``): its distinct neighbours, either direction, ascending."""
    index = {n: i for i, n in enumerate(names)}
    neighbours: list[set[int]] = [set() for _ in names]
    for u, v in graph.edges():
        i, j = index[u], index[v]
        neighbours[i].add(j)
        neighbours[j].add(i)
    return [sorted(s) for s in neighbours]


def _largest_component(adjacency: list[list[int]]) -> list[int]:
    """Vertices of the largest connected component, ascending (ties: the one met first)."""
    seen = [False] * len(adjacency)
    best: list[int] = []
    for root in range(len(adjacency)):
        if seen[root]:
            continue
        seen[root] = True
        component, stack = [root], [root]
        while stack:
            for j in adjacency[stack.pop()]:
                if not seen[j]:
                    seen[j] = True
                    component.append(j)
                    stack.append(j)
        if len(component) > len(best):
            best = component
    return sorted(best)


def fluid_communities(adjacency: list[list[int]], k: int, max_iter: int = 100, seed: int = 0) -> list[int]:
    """Asynchronous fluid communities of a connected graph; returns a community id per vertex.

    ``adjacency[v]`` lists the neighbours of vertex ``v`` (a self-loop lists ``v``). The same
    computation as ``networkx.algorithms.community.asyn_fluidc(G, k, max_iter, seed)`` on a
    ``G`` with nodes ``0..n-1`` whose neighbours iterate in the order given: each sweep visits
    the vertices in a seeded random order and moves a vertex to the community of highest summed
    density among itself and its neighbours (ties within 1e-4: keep its own, else draw one).
    """
    n = len(adjacency)
    if not 0 < k <= n:
        raise ValueError(f"need 0 < k <= {n} communities, got {k}")
    rng = random.Random(seed)
    vertices = list(range(n))
    rng.shuffle(vertices)
    community = [-1] * n
    size = [0] * k
    density = [0.0] * k
    for c, v in enumerate(vertices[:k]):
        community[v] = c
        size[c] = 1
        density[c] = 1.0
    for _ in range(max_iter):
        changed = False
        vertices = list(range(n))
        rng.shuffle(vertices)
        for v in vertices:
            own = community[v]
            neighbours = adjacency[v]
            if own >= 0:
                for u in neighbours:
                    if community[u] != own:
                        break
                else:  # every neighbour shares its community: it stays (the common case)
                    continue
            total: dict[int, float] = {} if own < 0 else {own: density[own]}
            for u in neighbours:
                c = community[u]
                if c >= 0:
                    total[c] = total[c] + density[c] if c in total else density[c]
            if not total:
                continue
            top = max(total.values())
            best = [c for c, d in total.items() if top - d < 0.0001]
            if own in best:
                continue
            changed = True
            new = rng.choice(best)
            if own >= 0:
                size[own] -= 1
                density[own] = 1.0 / size[own]
            community[v] = new
            size[new] += 1
            density[new] = 1.0 / size[new]
        if not changed:
            break
    return community
