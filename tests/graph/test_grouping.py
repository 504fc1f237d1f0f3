"""Grouping an op graph into communities: their labels, sizes, policies and group edges."""
import networkx as nx
import numpy as np
import pytest

from driple.errors import DripleError
from driple.graph.build import build_input
from driple.graph.grouping import FluidGrouper, fluid_communities


def chain(n):
    g = nx.DiGraph()
    nx.add_path(g, [f"n{i}" for i in range(n)])
    return g


def test_every_node_in_exactly_one_group():
    g = nx.DiGraph(nx.karate_club_graph())
    grouper = FluidGrouper(4, seed=1).fit(g)
    assert set(grouper.labels_) == set(g.nodes)
    assert set(grouper.labels_.values()) == {0, 1, 2, 3}
    assert grouper.n_groups_ == 4


def test_same_seed_same_groups():
    g = nx.DiGraph(nx.karate_club_graph())
    a = FluidGrouper(5, seed=7).fit(g).labels_
    b = FluidGrouper(5, seed=7).fit(g).labels_
    assert a == b


def test_fewer_nodes_than_groups_gives_one_group_per_node():
    grouper = FluidGrouper(100).fit(chain(6))
    assert grouper.n_groups_ == 6 and sorted(grouper.labels_.values()) == list(range(6))


def test_largest_component_only():
    g = chain(5)
    g.add_edge("x", "y")
    grouper = FluidGrouper(2).fit(g)
    assert grouper.dropped_ == 2 and "x" not in grouper.labels_


@pytest.mark.parametrize("graph,k,seed", [
    (nx.karate_club_graph(), 4, 1),
    (nx.connected_watts_strogatz_graph(300, 4, 0.2, seed=3), 30, 7),
])
def test_fluid_communities_is_networkx_asyn_fluidc(graph, k, seed):
    # the same algorithm, draw for draw, when networkx iterates neighbours in ascending order
    n = graph.number_of_nodes()
    canonical = nx.Graph()
    canonical.add_nodes_from(range(n))
    canonical.add_edges_from(sorted((min(e), max(e)) for e in graph.edges))  # so neighbours ascend
    expected = sorted(sorted(c) for c in nx.community.asyn_fluidc(canonical, k, seed=seed))
    labels = fluid_communities([sorted(graph[v]) for v in range(n)], k, seed=seed)
    assert sorted(sorted(v for v in range(n) if labels[v] == c) for c in set(labels)) == expected


def test_groups_do_not_depend_on_edge_order():
    # networkx walked a DiGraph's undirected neighbours in set order, i.e. string-hash order:
    # the groups of one graph changed with PYTHONHASHSEED from one process to the next
    base = nx.connected_watts_strogatz_graph(60, 4, 0.3, seed=0)
    names = [f"op{i}" for i in range(60)]
    edges = [(names[u], names[v]) for u, v in base.edges]
    a, b = nx.DiGraph(), nx.DiGraph()
    a.add_nodes_from(names)
    b.add_nodes_from(names)
    a.add_edges_from(edges)
    b.add_edges_from((v, u) for u, v in reversed(edges))
    assert FluidGrouper(6, seed=3).fit(a).labels_ == FluidGrouper(6, seed=3).fit(b).labels_


def test_policies():
    assert FluidGrouper(100, policy="none").target_groups(5000) == 5000
    assert FluidGrouper(100, policy="uniform").target_groups(5000) == 100
    # proportional: 100 * log10(n)/log10(1000): 10 000 ops → 133, 100 ops → 67
    p = FluidGrouper(100, policy="proportional", reference_nodes=1000)
    assert p.target_groups(10_000) == 133 and p.target_groups(100) == 67
    with pytest.raises(DripleError, match="unknown grouping policy"):
        FluidGrouper(10, policy="random").fit(chain(3))


def test_proportional_policy_gives_at_least_two_groups():
    # M=1: 1 * log10(1000) / log10(1000) = 1 group, raised to the policy's minimum of 2
    p = FluidGrouper(1, policy="proportional", reference_nodes=1000)
    assert p.target_groups(1000) == 2
    assert p.fit(chain(10)).n_groups_ == 2
    # but never more groups than ops: a 1-op graph is one group
    assert p.target_groups(1) == 1


# The groups of Zachary's karate club (34 members) in 3 groups with the default seed, worked
# out once and written down: a change of the default seed (42) or of the draws regroups the
# graphs every shipped inspector reads, and fails here. (Seed 0 gives other groups.)
KARATE_3_GROUPS_DEFAULT_SEED = [0, 1, 2, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 2, 2, 2, 0,
                                1, 2, 1, 2, 1, 2, 1, 0, 0, 1, 2, 2, 1, 2, 0, 2, 2]


def test_default_seed_groups_are_pinned():
    g = nx.DiGraph(nx.karate_club_graph())
    grouper = FluidGrouper(3).fit(g)
    assert grouper.seed == 42 and grouper.policy == "uniform" and FluidGrouper().n_groups == 100
    assert [grouper.labels_[v] for v in g.nodes] == KARATE_3_GROUPS_DEFAULT_SEED


def test_build_input_default_grouping_is_pinned(mlp_step):
    # the 38 ops of the MLP step in 4 groups with build_input's default seed, written down once
    model, batch, loss, opt = mlp_step
    data = build_input(model, batch, loss_fn=loss, optimizer=opt, groups=4)
    assert data.grouping_key == "uniform-M4-seed42"
    assert data.summary["ops"] == 38 and data.x[:, 2].tolist() == [14.0, 4.0, 17.0, 3.0]
    other = build_input(model, batch, loss_fn=loss, optimizer=opt, groups=4, seed=0)
    assert other.grouping_key == "uniform-M4-seed0" and other.x[:, 2].tolist() == [5.0, 10.0, 9.0, 14.0]


def test_aggregate_and_edges():
    g = chain(4)  # n0-n1 | n2-n3 when split in 2
    grouper = FluidGrouper(2, seed=0).fit(g)
    sums = grouper.aggregate(g, {"one": np.ones(4), "idx": np.arange(4.0)})
    assert sums["one"].sum() == 4 and sums["idx"].sum() == 6
    edge_index, weight = grouper.group_edges(g)
    assert edge_index.shape == (2, 2) and weight.tolist() == [1.0, 1.0]
