"""The distributed strategies a setting can name, each declared once with everything that varies.

A :class:`Strategy` says how its part of a setting id reads (``ddp-w2``, ``ps-p1w2``), which
settings are valid, how its communication is added to a traced step's op graph, which worker
module every rank runs, and what of a setting shapes the graph (the graph-cache key). The
readers: :mod:`driple.settings` (ids), :mod:`driple.graph.build` (communication),
:mod:`driple.collect.launcher` (workers), :mod:`driple.inspector.dataset` (cache keys) and
``driple graph``, and the two physical priors that depend on the strategy: how its messages
use a link (:attr:`Strategy.link_use`, read by :mod:`driple.graph.summary_features`) and what
one worker holds in memory (:class:`WorkerMemory`, read by :mod:`driple.graph.memory`). A new
strategy is one :func:`register_strategy` call (see :mod:`.ddp`, :mod:`.ps`, :mod:`.fsdp`) plus
its graph hook and its worker; no other module branches on a strategy's name.

The graph hook and the worker are named as ``"module:function"`` and ``"module"`` strings, read
by the layer that uses them, so declaring a strategy imports neither the graph builder nor
the collector (this module is below both). A hook may also be given as the function itself.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Callable, Optional, Union

from driple.errors import DripleError

#: The ranks part of a setting id: optional ``p<servers>``, then ``w<workers>``.
RANKS = r"(?:p(?P<servers>\d+))?w(?P<workers>\d+)"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: How a strategy's messages use a worker's link (:attr:`Strategy.link_use`).
LINK_USES = {
    "duplex": "collectives send and receive at once: time = max(tx, rx) / link",
    "fan_in": "push then pull through each server's link, which carries every worker's share: "
              "time = (tx + rx) x workers / servers / link",
}


@dataclass(frozen=True)
class WorkerMemory:
    """What one worker of a strategy holds beyond its activations (the memory simulator's and
    the memory prior's input).

    Args:
        gradient_copy: A second copy of every gradient is held all step (DDP's reducer buckets).
        optimizer_on_worker: The worker steps the optimizer and holds its state (False: the
            servers do, and the worker receives fresh parameters after its backward pass).
        units: ``"module:function"`` grouping parameter names into sharded units
            (``function(param_names) -> [(unit name, [index, ...]), ...]``, the root unit
            named ``""``); set: parameters, gradients and optimizer state are divided over the
            workers, and a unit's full parameters are gathered only while it computes (the
            root's from forward to backward). None: every worker holds the whole model.
        runtime_modules: Modules the strategy's wrapper imports into every worker (DDP's and
            ``fully_shard``'s construction import ``torch._dynamo``, about 24 MB of heap): part of
            the fitted offset, so a user's model code that imports them too adds nothing for them
            (:func:`driple.graph.memory.library_heap_mb`).
        sample_points: ``"module:function"`` giving the points where the strategy's collector
            reads a sharded worker's memory and the collectives it waits in before each
            (:func:`driple.graph.sharded_cycle.sharded_points` is its signature); None: module
            boundaries of the forward pass and each gradient's accumulation
            (:func:`driple.graph.memory_cycle.memory_cycle`).
    """

    gradient_copy: bool = False
    optimizer_on_worker: bool = True
    units: Optional[str] = None
    runtime_modules: tuple = ()
    sample_points: Optional[str] = None

    @property
    def sharded(self) -> bool:
        return self.units is not None


@dataclass(frozen=True)
class Strategy:
    """A distributed strategy.

    Args:
        name: Its word in setting ids (``ddp``), lower case.
        description: A few words said in error messages (``all-reduce``).
        ranks_id: Format of the ranks part of the id from a setting's ``workers`` and
            ``servers``, e.g. ``"w{workers}"`` (``cpu-ddp-w2-lo``).
        graph_key: Format of the part of a setting that shapes the graph, from ``workers``,
            ``servers`` and ``backend`` (the device's collective backend, where the bytes of a
            collective depend on it) (``"ddp-w{workers}"``: the same graph on loopback and on a
            1 Gbit/s link).
        comm: Adds the strategy's communication to an op graph:
            ``comm(graph, traced_step, setting) -> [{"params": [...], "bytes": int}, ...]`` (one
            entry per bucket/shard); a function or ``"module:function"``.
        worker: Module every rank runs as ``python -m <worker> --job JOB.json``.
        comm_units: What the entries ``comm`` returns are, in words (``all-reduce buckets``).
        title: The strategy in the words of a refusal (``DDP``: "a DDP setting has no ...").
        servers: True when its ranks include parameter servers (at least one; one when the
            builder is given none); False: a setting with servers is refused, and a servers
            count given to the builder is ignored.
        asynchronous: True when it also runs without synchronising (``-async`` settings).
        validate: ``validate(setting)`` raises :class:`DripleError` for other settings the
            strategy cannot run; None: no other rule.
        ranks: Regex of the ranks part of an id, with the named groups ``workers`` and
            optionally ``servers`` (:data:`RANKS` by default).
        link_use: How its messages use a link, a key of :data:`LINK_USES`.
        memory: What one worker holds (:class:`WorkerMemory`).
    """

    name: str
    description: str
    ranks_id: str
    graph_key: str
    comm: Union[str, Callable]
    worker: str
    comm_units: str = "messages"
    title: str = ""
    servers: bool = False
    asynchronous: bool = False
    validate: Optional[Callable] = None
    ranks: str = RANKS
    link_use: str = "duplex"
    memory: WorkerMemory = WorkerMemory()

    def check(self, setting) -> None:
        """Refuse (:class:`DripleError`) a setting this strategy cannot run."""
        title = self.title or self.name
        if self.servers and setting.servers < 1:
            raise DripleError(f"a {title} setting needs at least one server (p1, p2, ...)")
        if not self.servers and setting.servers:
            raise DripleError(f"a {title} setting has no parameter servers; drop the 'p<N>' part")
        if not self.asynchronous and not setting.synchronous:
            others = " or ".join(repr(s.name) for s in _STRATEGIES.values() if s.asynchronous)
            raise DripleError(f"{title} is always synchronous; '-async' applies to "
                              f"{others or 'no'} settings only")
        if self.validate is not None:
            self.validate(setting)

    def add_comm(self, graph, traced, setting) -> list:
        """Run :attr:`comm` on a traced step's op graph for ``setting``."""
        return resolve_function(self.comm)(graph, traced, setting)

    def id_part(self, setting) -> str:
        """The ranks part of ``setting``'s id, e.g. ``p1w2``."""
        return self.ranks_id.format(workers=setting.workers, servers=setting.servers)

    def graph_setting(self, setting) -> str:
        """The part of ``setting`` that shapes its graph, e.g. ``ddp-w2``."""
        from driple.hardware.devices import device_kind

        return self.graph_key.format(workers=setting.workers, servers=setting.servers,
                                     backend=device_kind(setting.device).collective_backend)


_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    """Add a strategy; its name becomes valid in setting ids."""
    if not isinstance(strategy, Strategy):
        raise TypeError(f"expected a Strategy, got {type(strategy).__name__}")
    if not _NAME.fullmatch(strategy.name) or strategy.name in ("none", "single"):
        raise ValueError(f"strategy name {strategy.name!r} must be a lower-case word (not 'none')")
    if strategy.name in _STRATEGIES:
        raise ValueError(f"strategy {strategy.name!r} registered twice")
    if strategy.link_use not in LINK_USES:
        raise ValueError(f"strategy {strategy.name!r}: link_use must be one of {', '.join(LINK_USES)}")
    _STRATEGIES[strategy.name] = strategy
    return strategy


def unregister_strategy(name: str) -> None:
    """Remove a registered strategy (tests register toy ones)."""
    _STRATEGIES.pop(name, None)


def worker_memory(name) -> WorkerMemory:
    """What one worker of strategy ``name`` holds; a single process (``"none"``, unknown) holds
    the plain model (:class:`WorkerMemory` defaults)."""
    strategy = find_strategy(name)
    return strategy.memory if strategy is not None else WorkerMemory()


def strategy_names() -> tuple[str, ...]:
    """Names of the registered strategies, in registration order."""
    return tuple(_STRATEGIES)


def find_strategy(name) -> Optional[Strategy]:
    """The strategy called ``name``, or None."""
    return _STRATEGIES.get(name) if isinstance(name, str) else None


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name``; a :class:`DripleError` listing the known ones otherwise."""
    strategy = find_strategy(name)
    if strategy is None:
        raise DripleError(f"unknown strategy {name!r}; use {describe_strategies()}")
    return strategy


def describe_strategies() -> str:
    """``'ddp' (all-reduce) or 'ps' (parameter server)``: the known strategies in words."""
    words = [f"{s.name!r} ({s.description})" for s in _STRATEGIES.values()]
    return " or ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else "".join(words)


def resolve_function(ref: Union[str, Callable]) -> Callable:
    """A function given as itself or as ``"module:function"``."""
    if callable(ref):
        return ref
    module, _, name = str(ref).partition(":")
    return getattr(importlib.import_module(module), name)
