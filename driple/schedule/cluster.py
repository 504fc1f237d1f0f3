"""The simulated cluster: worker slots ("nodes") that each run up to ``max_share`` jobs' workers.

A node is one worker slot of the catalogue's setting, with the slot's capacity (compute in % of
a core, memory in MB; see :mod:`driple.schedule.catalogue`): the unit the measured profiles
describe and the unit the measured co-runs shared (one worker of each job on one core). A job
of ``w`` workers holds ``w`` nodes, one worker on each; its workers step together, so the job
runs at the pace of its most slowed node.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from driple.errors import DripleError

MAX_SHARE = 2  # jobs per node: the measured co-runs are pairs


@dataclass
class Node:
    """One worker slot: ``index``, ``capacity`` (``{"compute": %, "memory": MB}``) and the jobs
    whose workers it runs now (``residents``)."""

    index: int
    capacity: dict
    residents: list = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.residents


@dataclass
class Cluster:
    """``nodes`` worker slots of equal ``capacity``, each shared by at most ``max_share`` jobs."""

    nodes: list
    max_share: int = MAX_SHARE

    @classmethod
    def uniform(cls, count: int, capacity: dict, max_share: int = MAX_SHARE) -> Cluster:
        if int(count) < 1:
            raise DripleError(f"a cluster needs at least 1 node, got {count}")
        if int(max_share) < 1:
            raise DripleError(f"max_share is jobs per node (>= 1), got {max_share}")
        return cls([Node(i, dict(capacity)) for i in range(int(count))], int(max_share))

    def __len__(self) -> int:
        return len(self.nodes)

    def empty_nodes(self) -> list:
        return [n for n in self.nodes if n.empty]

    def shareable_nodes(self) -> list:
        """Nodes that run some job and have room for one more."""
        return [n for n in self.nodes if 0 < len(n.residents) < self.max_share]
