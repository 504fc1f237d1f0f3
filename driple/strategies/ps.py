"""Parameter server: P servers own the parameters in shards, W workers push gradients to them
and pull fresh parameters back (``torch.distributed.rpc``), synchronously or not. Settings
``<device>-ps-p<P>w<W>-<network>[-async]``: at least one server.

:func:`ps_shards` is the one placement of parameters on servers: the graph builder's
communication nodes and the collector's servers both use it, so graph and job agree.
"""
from __future__ import annotations

from driple.strategies.registry import Strategy, WorkerMemory, register_strategy


def ps_shards(param_bytes: list[int], servers: int) -> list[int]:
    """Server index of each parameter: largest first onto the least-loaded server (ties: lowest id)."""
    if servers < 1:
        raise ValueError("servers must be >= 1")
    load = [0] * servers
    owner = [0] * len(param_bytes)
    for i in sorted(range(len(param_bytes)), key=lambda i: (-param_bytes[i], i)):
        s = min(range(servers), key=lambda s: (load[s], s))
        owner[i] = s
        load[s] += param_bytes[i]
    return owner


PS = register_strategy(Strategy(
    name="ps",
    description="parameter server",
    title="parameter-server",
    ranks_id="p{servers}w{workers}",
    graph_key="ps-p{servers}w{workers}",
    comm="driple.graph.comm:ps_comm",
    worker="driple.collect.workers.ps",
    comm_units="server shards",
    servers=True,
    asynchronous=True,
    link_use="fan_in",
    memory=WorkerMemory(optimizer_on_worker=False),  # servers step; parameters come back by pull
))
