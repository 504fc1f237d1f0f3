"""Train / validation / test splits of an :class:`~driple.inspector.dataset.InspectorDataset`.

- ``random``: 60/20/20 of the jobs, seeded. Jobs with the same configuration (repeated
  measurements of one model, knobs, batch size, optimizer) stay on one side, so a test job's
  graph is never seen in training.
- ``family``: leave-one-model-family-out — every job of one family is test; the rest is split
  75/25 into train and validation. :func:`family_splits` gives one split per family.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError

SPLIT_KINDS = ("random", "family")


@dataclass
class Split:
    """Positions (into a dataset) of the train, validation and test jobs."""

    kind: str
    train: list[int]
    val: list[int]
    test: list[int]
    seed: int = 0
    held_out: Optional[str] = None  # the test family of a "family" split
    job_ids: dict = field(default_factory=dict, repr=False)

    def to_dict(self, dataset) -> dict:
        """Plain-type record with job ids (positions are only meaningful for one dataset)."""
        ids = dataset.job_ids
        return {"kind": self.kind, "seed": self.seed, "held_out": self.held_out,
                **{part: [ids[i] for i in getattr(self, part)] for part in ("train", "val", "test")}}

    @classmethod
    def from_dict(cls, record: dict, dataset) -> "Split":
        """The recorded split on ``dataset``; jobs missing from ``dataset`` are dropped."""
        pos = {job: i for i, job in enumerate(dataset.job_ids)}
        parts = {p: [pos[j] for j in record.get(p, []) if j in pos] for p in ("train", "val", "test")}
        return cls(record.get("kind", "random"), **parts, seed=int(record.get("seed", 0)),
                   held_out=record.get("held_out"))


def _cut_groups(keys: Sequence[str], fractions: Sequence[float], rng: np.random.Generator):
    """Assign whole groups of equal key to parts whose sizes follow ``fractions``.

    Groups are shuffled and laid end to end; a group goes to the part its midpoint falls in.
    No part is left empty while another holds two or more groups.
    """
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    order = list(groups)
    rng.shuffle(order)
    bounds = np.cumsum(fractions)[:-1] * len(keys)
    parts: list[list[str]] = [[] for _ in fractions]
    done = 0
    for k in order:
        parts[int(np.searchsorted(bounds, done + len(groups[k]) / 2, side="right"))].append(k)
        done += len(groups[k])
    for part in parts:
        if not part:
            donor = max(parts, key=len)
            if len(donor) > 1:
                part.append(donor.pop())
    return [sorted(i for k in part for i in groups[k]) for part in parts]


def random_split(dataset, seed: int = 0, fractions: Sequence[float] = (0.6, 0.2, 0.2)) -> Split:
    """Seeded split of the jobs into train/val/test, whole configurations at a time."""
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 1e-6 or min(fractions) < 0:
        raise ValueError(f"fractions must be three shares summing to 1 (got {fractions})")
    keys = dataset.config_keys
    if len(set(keys)) < 3:
        raise DripleError(f"a random split needs jobs of at least 3 configurations "
                          f"(the dataset has {len(set(keys))})")
    train, val, test = _cut_groups(keys, fractions, np.random.default_rng(seed))
    return Split("random", train, val, test, seed=seed)


def family_split(dataset, family: str, seed: int = 0, val_fraction: float = 0.25) -> Split:
    """All jobs of ``family`` as test; the others split into train and validation."""
    families = dataset.families
    if family not in families:
        raise DripleError(f"no job of family {family!r} (families: {', '.join(sorted(set(families)))})")
    test = [i for i, f in enumerate(families) if f == family]
    rest = [i for i, f in enumerate(families) if f != family]
    if not rest:
        raise DripleError("leave-family-out needs jobs of at least two model families")
    keys = dataset.config_keys
    rest_keys = [keys[i] for i in rest]
    if len(set(rest_keys)) < 2:
        train, val = rest, rest  # too few to hold any out: validate on the training jobs
    else:
        tr, va = _cut_groups(rest_keys, (1 - val_fraction, val_fraction), np.random.default_rng(seed))
        train, val = [rest[i] for i in tr], [rest[i] for i in va]
    return Split("family", sorted(train), sorted(val), test, seed=seed, held_out=family)


def family_splits(dataset, seed: int = 0, val_fraction: float = 0.25) -> list[Split]:
    """One leave-one-family-out split per model family of the dataset (sorted by name)."""
    families = sorted(set(dataset.families))
    if len(families) < 2:
        raise DripleError(f"leave-family-out needs at least two model families "
                          f"(the dataset has {families})")
    return [family_split(dataset, f, seed, val_fraction) for f in families]


def make_split(dataset, kind: str = "random", seed: int = 0, family: Optional[str] = None) -> Split:
    """``random_split`` or, for ``kind="family"``, the split holding out ``family``."""
    if kind == "random":
        return random_split(dataset, seed)
    if kind == "family":
        if family is None:
            raise DripleError("a family split needs the family to hold out (--family NAME)")
        return family_split(dataset, family, seed)
    raise DripleError(f"unknown split {kind!r}; use one of {', '.join(SPLIT_KINDS)}")
