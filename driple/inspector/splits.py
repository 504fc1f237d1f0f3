"""Splits of a dataset's jobs into four disjoint parts, so that no reported number was used to choose.

Parts (positions into the dataset, in its order; :data:`PARTS`):

- ``train``: what a model is fitted on;
- ``val`` (validation): early stopping and every model choice (options, which model to ship);
- ``calibration``: conformal prediction intervals, and nothing else;
- ``test``: looked at once, to report; never while choosing anything.

Kinds:

- ``random``: whole *architectures* (model + knobs, see :mod:`driple.inspector.jobs`) go to
  one part, so a test job never has an optimizer or batch-size sibling in another part: the
  question answered is "a network not measured yet", not "this network with another
  optimizer". The architectures are shuffled (seeded) and cut at job-count fractions
  (:data:`RANDOM_FRACTIONS`, 50/15/15/20), in the manner of scikit-learn's
  ``GroupShuffleSplit``.
- ``family``: leave one model family out: every job of the family is test; the other jobs
  are cut into train / val / calibration the same way (:data:`REST_FRACTIONS`, 70/15/15).
  :func:`family_splits` gives one split per family.

:func:`holdout_split` is the general form (given test jobs, cut the rest); it also makes the
split of a transferred inspector's source dataset that leaves out what a fold holds out.

Every function takes an :class:`~driple.inspector.dataset.InspectorDataset` or a job table
(:func:`driple.inspector.jobs.job_table`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.jobs import job_table

SPLIT_KINDS = ("random", "family")
PARTS = ("train", "val", "calibration", "test")
#: Job shares of train, val, calibration and test in a random split.
RANDOM_FRACTIONS = (0.5, 0.15, 0.15, 0.2)
#: Job shares of train, val and calibration among the jobs a family split does not hold out.
REST_FRACTIONS = (0.7, 0.15, 0.15)
GROUP_BY = "architecture"


@dataclass
class Split:
    """Positions (into a dataset) of the jobs of each part; see the module doc.

    Construct with keywords: the field order (``test`` before ``calibration``) keeps splits
    written before the calibration part existed working.
    """

    kind: str
    train: list[int]
    val: list[int]
    test: list[int]
    seed: int = 0
    held_out: Optional[str] = None  # what the test part holds out: a family, or a description
    calibration: list[int] = field(default_factory=list)
    group_by: str = GROUP_BY  # what never straddles two parts ("configuration" in old records)

    def parts(self) -> dict[str, list[int]]:
        """``{part: positions}`` in the order of :data:`PARTS`."""
        return {p: list(getattr(self, p)) for p in PARTS}

    def check(self) -> "Split":
        """Raise :class:`DripleError` if two parts share a job; returns the split."""
        seen: dict[int, str] = {}
        for part, idx in self.parts().items():
            for i in idx:
                if i in seen:
                    raise DripleError(f"job {i} is in both the {seen[i]} and the {part} part of a split")
                seen[i] = part
        return self

    def to_dict(self, dataset) -> dict:
        """Plain-type record with job ids (positions are only meaningful for one dataset)."""
        ids = _job_ids(dataset)
        return {"kind": self.kind, "seed": self.seed, "held_out": self.held_out,
                "group_by": self.group_by,
                **{part: [ids[i] for i in idx] for part, idx in self.parts().items()}}

    @classmethod
    def from_dict(cls, record: dict, dataset) -> "Split":
        """The recorded split on ``dataset``; jobs missing from ``dataset`` are dropped. A record
        without a calibration part (written before there was one) gets an empty one."""
        pos = {job: i for i, job in enumerate(_job_ids(dataset))}
        parts = {p: [pos[j] for j in record.get(p) or [] if j in pos] for p in PARTS}
        return cls(record.get("kind", "random"), seed=int(record.get("seed", 0)),
                   held_out=record.get("held_out"),
                   group_by=record.get("group_by", "configuration"), **parts)


def _job_ids(data) -> list[str]:
    ids = getattr(data, "job_ids", None)
    return [str(j) for j in ids] if ids is not None else job_table(data)["job_id"].tolist()


def assign_groups(sizes: Sequence[int], fractions: Sequence[float]) -> list[int]:
    """The part of each group, for groups laid end to end in the given order.

    A group of ``sizes[g]`` jobs goes to the part its midpoint (in jobs) falls in, the parts
    taking ``fractions`` of all jobs in turn. Then no part with a non-zero fraction is left
    empty while another holds two or more groups: it takes the last group of the largest part.
    """
    total = float(sum(sizes))
    bounds = np.round(np.cumsum(fractions)[:-1] * total, 9)  # 0.65 * 20 is 13, not 13 + 2e-15
    part_of, done = [], 0
    for size in sizes:
        part_of.append(int(np.searchsorted(bounds, done + size / 2, side="right")))
        done += size
    for p, share in enumerate(fractions):
        if share > 0 and p not in part_of:
            counts = [part_of.count(q) for q in range(len(fractions))]
            donor = int(np.argmax(counts))
            if counts[donor] > 1:
                part_of[len(part_of) - 1 - part_of[::-1].index(donor)] = p
    return part_of


def cut_groups(keys: Sequence[str], fractions: Sequence[float], seed: int = 0) -> list[list[int]]:
    """Positions of ``keys`` per part: groups of equal key shuffled (seeded), then
    :func:`assign_groups`. A group is never cut."""
    _check_fractions(fractions)
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    order = list(groups)
    np.random.default_rng(seed).shuffle(order)
    part_of = assign_groups([len(groups[k]) for k in order], fractions)
    parts: list[list[int]] = [[] for _ in fractions]
    for k, p in zip(order, part_of):
        parts[p].extend(groups[k])
    return [sorted(p) for p in parts]


def _check_fractions(fractions: Sequence[float]) -> None:
    if abs(sum(fractions) - 1) > 1e-6 or min(fractions) < 0:
        raise ValueError(f"fractions must be shares summing to 1 (got {tuple(fractions)})")


def random_split(data, seed: int = 0, fractions: Sequence[float] = RANDOM_FRACTIONS) -> Split:
    """Seeded split of the jobs into train/val/calibration/test, whole architectures at a time
    (``fractions`` in that order)."""
    if len(fractions) != 4:
        raise ValueError(f"a random split takes four fractions: train, val, calibration, test "
                         f"(got {tuple(fractions)})")
    table = job_table(data)
    needed = sum(1 for f in fractions if f > 0)
    if table["architecture"].nunique() < needed:
        raise DripleError(f"a random split needs jobs of at least {needed} architectures "
                          f"(the dataset has {table['architecture'].nunique()})")
    train, val, calibration, test = cut_groups(table["architecture"].tolist(), fractions, seed)
    return Split("random", train=train, val=val, calibration=calibration, test=test, seed=seed).check()


def holdout_split(data, test: Sequence[int], seed: int = 0,
                  fractions: Sequence[float] = REST_FRACTIONS, kind: str = "holdout",
                  held_out: Optional[str] = None) -> Split:
    """``test`` (positions) as the test part; the other jobs cut into train / val /
    calibration (``fractions``), whole architectures at a time."""
    if len(fractions) != 3:
        raise ValueError(f"the rest of a hold-out split takes three fractions: train, val, "
                         f"calibration (got {tuple(fractions)})")
    table = job_table(data)
    test = sorted(set(int(i) for i in test))
    held = set(test)
    rest = [i for i in range(len(table)) if i not in held]
    archs = table["architecture"].tolist()
    rest_keys = [archs[i] for i in rest]
    needed = sum(1 for f in fractions if f > 0)
    if len(set(rest_keys)) < needed:
        what = f" outside {held_out}" if held_out else " outside the held-out jobs"
        raise DripleError(f"a hold-out split needs jobs of at least {needed} architectures{what} "
                          f"(there are {len(set(rest_keys))})")
    parts = cut_groups(rest_keys, fractions, seed)
    train, val, calibration = ([rest[i] for i in p] for p in parts)
    return Split(kind, train=train, val=val, calibration=calibration, test=test, seed=seed,
                 held_out=held_out).check()


def family_split(data, family: str, seed: int = 0,
                 fractions: Sequence[float] = REST_FRACTIONS) -> Split:
    """All jobs of ``family`` as test; the others cut into train / val / calibration."""
    families = job_table(data)["family"].tolist()
    if family not in families:
        raise DripleError(f"no job of family {family!r} (families: {', '.join(sorted(set(families)))})")
    if len(set(families)) < 2:
        raise DripleError("leave-family-out needs jobs of at least two model families")
    test = [i for i, f in enumerate(families) if f == family]
    return holdout_split(data, test, seed, fractions, kind="family", held_out=family)


def family_splits(data, seed: int = 0, fractions: Sequence[float] = REST_FRACTIONS,
                  families: Optional[Sequence[str]] = None) -> list[Split]:
    """One leave-one-family-out split per model family (sorted by name), or per family of
    ``families``."""
    present = sorted(set(job_table(data)["family"]))
    if len(present) < 2:
        raise DripleError(f"leave-family-out needs at least two model families (the dataset has {present})")
    if families:
        unknown = sorted(set(families) - set(present))
        if unknown:
            raise DripleError(f"no job of family {', '.join(unknown)} (families: {', '.join(present)})")
        present = [f for f in present if f in set(families)]
    return [family_split(data, f, seed, fractions) for f in present]


def make_split(data, kind: str = "random", seed: int = 0, family: Optional[str] = None) -> Split:
    """:func:`random_split` or, for ``kind="family"``, the split holding out ``family``."""
    if kind == "random":
        return random_split(data, seed)
    if kind == "family":
        if family is None:
            raise DripleError("a family split needs the family to hold out (--family NAME)")
        return family_split(data, family, seed)
    raise DripleError(f"unknown split {kind!r}; use one of {', '.join(SPLIT_KINDS)}")


def make_splits(data, kind: str = "random", seed: int = 0,
                families: Optional[Sequence[str]] = None) -> list[Split]:
    """The folds of an evaluation: one random split, or one split per held-out family."""
    if kind == "random":
        if families:
            raise DripleError("families are held out by a family split, not a random one")
        return [random_split(data, seed)]
    if kind == "family":
        return family_splits(data, seed, families=families)
    raise DripleError(f"unknown split {kind!r}; use one of {', '.join(SPLIT_KINDS)}")
