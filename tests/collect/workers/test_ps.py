"""Parameter-server logic in-process: sharding, synchronous and asynchronous updates."""
from __future__ import annotations

import torch

from driple.collect.workers.ps import ShardServer
from driple.strategies.ps import ps_shards as shard_of


def _server(synchronous, workers=2):
    p = torch.zeros(3, requires_grad=True)
    return ShardServer([p], torch.optim.SGD([p], lr=1.0), workers=workers, synchronous=synchronous), p


def test_shards_balance_parameter_bytes():
    owner = shard_of([100, 10, 60, 50, 5], servers=2)
    load = [sum(s for s, o in zip([100, 10, 60, 50, 5], owner) if o == k) for k in range(2)]
    assert sorted(load) == [110, 115]  # largest first onto the least-loaded server
    assert shard_of([4, 4], servers=1) == [0, 0]


def test_synchronous_server_waits_for_every_worker_and_averages():
    server, p = _server(synchronous=True)
    first = server.push_pull([torch.tensor([2.0, 0.0, 0.0])])
    assert not first.done()  # waits for the other worker
    second = server.push_pull([torch.tensor([0.0, 2.0, 0.0])])
    assert first.done() and second.done() and server.steps == 1
    assert torch.equal(first.value()[0], torch.tensor([-1.0, -1.0, 0.0]))  # mean gradient, lr 1


def test_a_leaving_worker_releases_the_others():
    server, _ = _server(synchronous=True)
    pending = server.push_pull([torch.ones(3)])
    server.leave()
    assert pending.done() and server.steps == 1
    assert server.push_pull([torch.ones(3)]).done()  # alone now: no waiting


def test_asynchronous_server_steps_on_every_push():
    server, _ = _server(synchronous=False)
    a = server.push_pull([torch.ones(3)])
    b = server.push_pull([torch.ones(3)])
    assert a.done() and b.done() and server.steps == 2
    assert torch.equal(b.value()[0], torch.full((3,), -2.0))
