"""Distributed strategies (DDP all-reduce, parameter server), one registration each.

:mod:`.registry` holds :class:`Strategy` and :func:`register_strategy`; :mod:`.ddp` and
:mod:`.ps` register the built-in ones when this package is imported. It imports no torch.
"""
from __future__ import annotations

from driple.strategies import ddp, ps  # noqa: F401  (register the built-in strategies)
from driple.strategies.registry import (
    RANKS,
    Strategy,
    describe_strategies,
    find_strategy,
    get_strategy,
    register_strategy,
    strategy_names,
    unregister_strategy,
)

__all__ = ["RANKS", "Strategy", "describe_strategies", "find_strategy", "get_strategy",
           "register_strategy", "strategy_names", "unregister_strategy"]
