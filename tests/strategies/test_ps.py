"""The parameter-server strategy: where parameters live (graph builder and PS workers agree)."""
from driple.strategies import get_strategy
from driple.strategies.ps import ps_shards
from driple.settings import parse_setting


def test_ps_shards_greedy():
    # 10→s0, 8→s1, 5→s1 (8<10), 4→s0 (10<13), 3→s1 (13<14)
    assert ps_shards([10, 8, 5, 4, 3], 2) == [0, 1, 1, 0, 1]
    assert ps_shards([7, 7, 7], 1) == [0, 0, 0]


def test_registration():
    ps = get_strategy("ps")
    s = parse_setting("cpu-ps-p2w3-1g")
    assert ps.id_part(s) == "p2w3" and ps.graph_setting(s) == "ps-p2w3"
    assert ps.worker == "driple.collect.workers.ps" and ps.servers and ps.asynchronous
