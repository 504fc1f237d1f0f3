"""DDP: every worker holds the whole model and all-reduces its gradients (torch
``DistributedDataParallel``; gloo on CPU, NCCL on GPU). Settings ``<device>-ddp-w<N>-<network>``:
no parameter servers, always synchronous."""
from __future__ import annotations

from driple.strategies.registry import Strategy, WorkerMemory, register_strategy

DDP = register_strategy(Strategy(
    name="ddp",
    description="all-reduce",
    title="DDP",
    ranks_id="w{workers}",
    graph_key="ddp-w{workers}",
    comm="driple.graph.comm:ddp_comm",
    worker="driple.collect.workers.ddp",
    comm_units="all-reduce buckets",
    link_use="duplex",
    # the reducer's buckets hold a copy of every gradient; constructing DDP imports torch._dynamo
    memory=WorkerMemory(gradient_copy=True, runtime_modules=("torch._dynamo",)),
))
