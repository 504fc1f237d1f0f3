"""Distributed strategies (DDP all-reduce, parameter server, FSDP), one registration each.

:mod:`.registry` holds :class:`Strategy` and :func:`register_strategy`; :mod:`.ddp` and
:mod:`.ps`, :mod:`.fsdp` register the built-in ones when this package is imported. It imports no torch.
"""
from __future__ import annotations

from driple.strategies import ddp, fsdp, ps  # noqa: F401  (register the built-in strategies)
from driple.strategies.registry import (
    RANKS,
    LINK_USES,
    Strategy,
    WorkerMemory,
    describe_strategies,
    find_strategy,
    get_strategy,
    register_strategy,
    strategy_names,
    unregister_strategy,
    worker_memory,
)

__all__ = ["LINK_USES", "RANKS", "Strategy", "WorkerMemory", "describe_strategies", "find_strategy",
           "get_strategy", "register_strategy", "strategy_names", "unregister_strategy",
           "worker_memory"]
