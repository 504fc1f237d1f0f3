"""DDP: every worker holds the whole model and all-reduces its gradients (torch
``DistributedDataParallel``; gloo on CPU, NCCL on GPU). Settings ``<device>-ddp-w<N>-<network>``."""
from __future__ import annotations

from driple.errors import DripleError
from driple.strategies.registry import Strategy, register_strategy


def validate(setting) -> None:
    """A DDP setting has no parameter servers and is always synchronous."""
    if setting.servers:
        raise DripleError("a DDP setting has no parameter servers; drop the 'p<N>' part")
    if not setting.synchronous:
        raise DripleError("DDP is always synchronous; '-async' applies to 'ps' settings only")


DDP = register_strategy(Strategy(
    name="ddp",
    description="all-reduce",
    ranks_id="w{workers}",
    graph_key="ddp-w{workers}",
    comm="driple.graph.comm:ddp_comm",
    worker="driple.collect.workers.ddp",
    comm_units="all-reduce buckets",
    validate=validate,
))
