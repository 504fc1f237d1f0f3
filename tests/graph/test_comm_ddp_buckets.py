"""The builder's DDP buckets equal the buckets a real DistributedDataParallel all-reduces.

A one-process gloo group runs real DDP for three iterations; a comm hook records each bucket's
size after DDP's first-iteration rebuild. The traced graph's all-reduce nodes must match.
"""
import socket

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from driple.graph.comm import add_ddp_comm
from driple.graph.opgraph import build_op_graph
from driple.graph.trace import trace_training_step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gloo_group():
    store = dist.TCPStore("127.0.0.1", free_port(), 1, is_master=True)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def model():
    torch.manual_seed(0)
    # 0.03 MiB .. 16 MiB tensors: a small first bucket, then 25 MiB buckets
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2048), nn.ReLU(),
                         nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def test_buckets_match_real_ddp(gloo_group):
    torch.set_num_threads(1)
    batch = (torch.randn(2, 64), torch.randint(0, 10, (2,)))
    seen: dict[int, int] = {}

    def hook(_state, bucket):
        seen[bucket.index()] = bucket.buffer().numel() * bucket.buffer().element_size()
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    ddp = DistributedDataParallel(model())
    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    for it in range(3):
        if it == 2:
            seen.clear()  # buckets are rebuilt in gradient-ready order after the first iteration
        loss = nn.functional.cross_entropy(ddp(batch[0]), batch[1])
        loss.backward()
        opt.step()
        opt.zero_grad()
    real = [seen[i] for i in sorted(seen)]

    traced = trace_training_step(model(), batch, loss_fn=nn.functional.cross_entropy, optimizer="sgd")
    ours = [b["bytes"] for b in add_ddp_comm(build_op_graph(traced), traced, workers=2)]
    assert len(real) >= 2
    assert ours == real
