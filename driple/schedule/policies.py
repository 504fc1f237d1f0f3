"""Where a scheduler puts the job at the head of its FIFO queue.

Every policy takes empty nodes first; they differ in what they do when there are too few:

- ``fifo``: FIFO, exclusive: the job waits for empty nodes (no sharing);
- ``random``: packs the job's remaining workers on nodes that run one job, chosen at random,
  whatever the jobs are;
- ``driple``: packs only beside jobs it *predicts* it fits with: the rule of ``driple colocate``
  (:func:`driple.predict.colocate.colocate` on the slot's capacity says "packs well": no
  combined mean above capacity and no resource overloaded more than 5 % of the time) on
  driple's predicted profiles (with the simulation's prediction noise);
- ``oracle``: the same rule on the jobs' measured profiles.

The slow-down a co-location really causes is the simulator's business
(:mod:`driple.schedule.interference`, on measured profiles), the same for every policy.
"""
from __future__ import annotations

from driple.errors import DripleError
from driple.predict.colocate import MAX_OVERLOAD


class Policy:
    """Placement rule (module doc). ``packs``: whether it shares nodes; ``view``: which profiles
    it judges by (``predicted``, ``measured`` or None)."""

    name = "base"
    packs = False
    view: str | None = None

    def __init__(self) -> None:
        self._fits: dict = {}

    def fits(self, job, node, capacity: dict) -> bool:
        """Whether ``job`` may share ``node`` with the jobs already on it."""
        return True

    def order(self, nodes: list, rng) -> list:
        """The order shareable nodes are tried in."""
        return nodes

    def place(self, job, cluster, rng) -> list | None:
        """Nodes for ``job``'s workers, or None when it has to wait."""
        need = job.workers
        empty = cluster.empty_nodes()
        if job.exclusive or not self.packs:
            return empty[:need] if len(empty) >= need else None
        chosen = empty[:need]
        if len(chosen) == need:
            return chosen
        for node in self.order(cluster.shareable_nodes(), rng):
            if self.fits(job, node, node.capacity):
                chosen.append(node)
                if len(chosen) == need:
                    return chosen
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class FifoExclusive(Policy):
    name = "fifo"


class RandomPacking(Policy):
    name = "random"
    packs = True

    def order(self, nodes: list, rng) -> list:
        return [nodes[i] for i in rng.permutation(len(nodes))]


class GuidedPacking(Policy):
    """Packs by ``driple colocate``'s rule on the ``view`` profiles of the jobs."""

    packs = True

    def __init__(self, view: str, max_overload: float = MAX_OVERLOAD) -> None:
        super().__init__()
        self.max_overload = float(max_overload)
        if view not in ("predicted", "measured"):
            raise DripleError(f"view is 'predicted' or 'measured', not {view!r}")
        self.view = view
        self.name = "driple" if view == "predicted" else "oracle"

    def fits(self, job, node, capacity: dict) -> bool:
        from driple.predict.colocate import colocate

        profiles = [j.profile(self.view) for j in node.residents] + [job.profile(self.view)]
        key = tuple(sorted(id(p) for p in profiles))
        if key not in self._fits:
            named = {f"job{k}": p for k, p in enumerate(profiles)}
            self._fits[key] = colocate(named, capacity, max_overload=self.max_overload).verdict == "packs well"
        return self._fits[key]


POLICIES = {
    "fifo": FifoExclusive,
    "random": RandomPacking,
    "driple": lambda **kw: GuidedPacking("predicted", **kw),
    "oracle": lambda **kw: GuidedPacking("measured", **kw),
}


def get_policy(name: str, max_overload: float = MAX_OVERLOAD) -> Policy:
    """A fresh policy by name (``fifo``, ``random``, ``driple``, ``oracle``); ``max_overload``:
    the share of time a resource may be overloaded for ``driple colocate`` to say "packs well"
    (the guided policies' rule)."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise DripleError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
    if not 0.0 <= max_overload <= 1.0:
        raise DripleError(f"max_overload is a share of time in [0, 1], got {max_overload}")
    return factory(max_overload=max_overload) if name in ("driple", "oracle") else factory()
