"""How an inspector predicts a job of a model family it was not trained on.

An inspector's conformal intervals (:mod:`driple.predict.intervals`) and its roofline modes
(:mod:`driple.inspector.roofline`) are calibrated and chosen on calibration and validation jobs
of the families it trained on. A user's own model is of no such family, and there the
residuals are wider: intervals calibrated on seen families cover 82-88 % of a held-out
family's jobs at a nominal 90 % (``trained_models/evaluation/results.md``).

:class:`UnseenFamilyCalibration` is what an evaluation's leave-one-family-out folds teach about
that case, kept in a checkpoint (``info["unseen_family"]``, plain numbers) and applied by
:class:`~driple.predict.predictor.Predictor` to every job whose family is not among
:attr:`UnseenFamilyCalibration.families`:

- ``intervals``: conformal intervals calibrated on every fold's held-out residuals (the
  inspector retrained without the family); what the shipped inspectors carry
  (``scripts/calibrate_unseen_families.py``);
- ``modes``: optionally, per duration target, how the roofline joins the inspector's
  prediction *as it is* (``"inspector"``: unchanged; ``"roofline"``; ``"mean"``, geometric),
  chosen on the same held-out jobs (the intervals then calibrated with them applied). Shipped
  for a setting only where they win cross-fitted (:func:`modes_win`: lower median MAPE over the
  held-out families than the inspector as it is), the rule :func:`nested_choice` measures;
  empty otherwise.

:func:`calibrate` makes one with modes from held-out predictions; :func:`cross_fitted` measures
that procedure honestly (each fold's modes and intervals from the *other* folds, checked on its
own held-out family).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from driple.errors import DripleError

#: Where a profile says its job's family stands (``ResourceProfile.calibration``).
SEEN, UNSEEN = "seen family", "unseen family"
#: The family of a model built from a user's factory (:func:`driple.graph.build.build_input`).
USER_FAMILY = "user"


class UnseenFamilyCalibration:
    """Roofline modes and intervals for jobs of unseen families (module docstring).

    Args:
        modes: ``{duration target: mode}`` over the inspector's prediction as it is.
        intervals: :class:`~driple.predict.intervals.ConformalIntervals` (or its dict).
        families: The families the inspector trained on (a job of any other is unseen).
        source: Where the calibration came from (file, date, command).
    """

    def __init__(self, modes: dict, intervals, families: Sequence[str], source: Optional[dict] = None):
        from driple.inspector.roofline import MODES
        from driple.predict.intervals import ConformalIntervals

        bad = sorted(m for m in modes.values() if m not in MODES)
        if bad:
            raise DripleError(f"unknown roofline mode(s) {', '.join(bad)}; choose among {', '.join(MODES)}")
        self.modes = dict(modes)
        self.intervals = intervals if isinstance(intervals, ConformalIntervals) else ConformalIntervals.from_dict(intervals)
        self.families = tuple(sorted(set(map(str, families))))
        self.source = dict(source or {})

    def is_unseen(self, family: Optional[str]) -> bool:
        """True for a job of no training family (a user's model, an unknown family)."""
        return family is None or str(family) not in self.families

    @property
    def joined(self) -> dict:
        """The modes that change a prediction (:func:`joined_modes`): without any, the roofline
        need not be evaluated."""
        return joined_modes(self.modes)

    def join(self, predicted: np.ndarray, roofline: Optional[np.ndarray], targets: Sequence[str]) -> np.ndarray:
        """``predicted`` ``[n, targets]`` (the inspector as it is) with the modes applied;
        unchanged without a roofline."""
        from driple.inspector.roofline import apply_modes

        if roofline is None or not self.joined:
            return np.asarray(predicted, dtype=np.float64)
        return apply_modes(predicted, roofline, targets, self.joined)

    def to_dict(self) -> dict:
        return {"modes": self.modes, "intervals": self.intervals.to_dict(),
                "families": list(self.families), "source": self.source}

    @classmethod
    def from_dict(cls, record: dict) -> "UnseenFamilyCalibration":
        try:
            return cls(record["modes"], record["intervals"], record["families"], record.get("source"))
        except (KeyError, TypeError, ValueError) as err:
            raise DripleError(f"the unseen-family calibration is damaged ({type(err).__name__}: {err})") from None


def joined_modes(modes: Optional[Mapping]) -> dict:
    """The modes of ``{target: mode}`` that change a prediction (not ``"inspector"``)."""
    return {t: m for t, m in (modes or {}).items() if m != "inspector"}


def pooled(folds: Sequence[dict]) -> dict:
    """The ``measured``, ``inspector`` and ``roofline`` arrays of held-out folds, concatenated."""
    return {k: np.concatenate([f[k] for f in folds]) for k in ("measured", "inspector", "roofline")}


def calibrate(targets: Sequence[str], measured: np.ndarray, inspector: np.ndarray, roofline: np.ndarray,
              families: Sequence[str], coverage: float = 0.9,
              source: Optional[dict] = None) -> UnseenFamilyCalibration:
    """Modes chosen and intervals calibrated on held-out-family jobs: their ``measured``
    targets and the ``inspector``'s and ``roofline``'s predictions ``[n, targets]`` (each
    from models that had not seen the job's family); ``families`` the shipped inspector's."""
    from driple.inspector.roofline import apply_modes, choose_modes
    from driple.predict.intervals import ConformalIntervals

    measured, inspector, roofline = (np.asarray(a, dtype=np.float64) for a in (measured, inspector, roofline))
    modes = choose_modes(targets, inspector, roofline, measured)
    joined = apply_modes(inspector, roofline, targets, modes)
    intervals = ConformalIntervals(coverage=coverage, names=list(targets)).fit(measured, np.clip(joined, 0, None))
    return UnseenFamilyCalibration(modes, intervals, families, source)


def cross_fitted(targets: Sequence[str], folds: Sequence[dict], coverage: float = 0.9) -> dict:
    """The procedure measured on held-out families: for each fold (``{"measured", "inspector",
    "roofline"}`` arrays of its held-out family), modes and intervals calibrated on the other
    folds only, applied to it. Returns ``{"scores"`` (:func:`~driple.inspector.scores.score_table`
    of the joined predictions, pooled), ``"coverage"`` (per target and mean), ``"modes"`` (per
    target: how many folds chose each mode)``}``."""
    from driple.inspector.scores import score_table
    from driple.predict.intervals import coverage as coverage_of

    if len(folds) < 3:
        raise DripleError("cross-fitting over families needs at least 3 family folds")
    measured, joined, low, high = [], [], [], []
    chosen: dict = {}
    for i, fold in enumerate(folds):
        others = [f for j, f in enumerate(folds) if j != i]
        rest = pooled(others)
        cal = calibrate(targets, rest["measured"], rest["inspector"], rest["roofline"], families=(), coverage=coverage)
        p = np.clip(cal.join(fold["inspector"], fold["roofline"], targets), 0, None)
        lo, hi = cal.intervals.interval(p)
        measured.append(fold["measured"]), joined.append(p), low.append(lo), high.append(hi)
        for t, m in cal.modes.items():
            chosen.setdefault(t, {}).setdefault(m, 0)
            chosen[t][m] += 1
    y = np.concatenate(measured)
    return {"scores": score_table(y, np.concatenate(joined), list(targets)),
            "coverage": coverage_of(y, np.concatenate(low), np.concatenate(high), names=list(targets)),
            "modes": chosen}


def modes_win(cross_fitted_scores: Mapping, as_is_scores: Mapping) -> bool:
    """Whether joining the roofline for unseen families is worth it: the median per-target MAPE
    of the modes measured cross-fitted (:func:`cross_fitted`) is lower than the inspector's as it
    is on the same held-out jobs (score tables of :func:`~driple.inspector.scores.score_table`)."""
    from driple.inspector.scores import table_summary

    return table_summary(cross_fitted_scores)["mape_median"] < table_summary(as_is_scores)["mape_median"]


def modes_ship(family: Mapping) -> bool:
    """The shipping rule for an evaluation's family split (``accuracy.json``'s ``family`` entry):
    its roofline modes for unseen families (``unseen_modes``) exist and :func:`modes_win` over
    the inspector as it is (``scores["inspector"]``)."""
    unseen = family.get("unseen_modes") or {}
    inspector = (family.get("scores") or {}).get("inspector")
    return "calibration" in unseen and inspector is not None and modes_win(unseen["cross_fitted"]["scores"], inspector)


def nested_choice(targets: Sequence[str], folds: Sequence[dict], coverage: float = 0.9) -> dict:
    """Whether to join the roofline for unseen families, decided without looking at the family
    it is measured on: for each fold, :func:`cross_fitted` on the *other* folds alone against the
    inspector as it is on them (median per-target MAPE decides); the modes (chosen on the other
    folds) are then applied to the fold only if they won there. Needs 4 folds or more. Returns
    ``{"scores"`` (pooled over the folds), ``"chosen"`` (per fold: ``"modes"`` or ``"as is"``)``}``."""
    from driple.inspector.scores import score_table

    if len(folds) < 4:
        raise DripleError("a nested choice over families needs at least 4 family folds")
    measured, predicted, chosen = [], [], []
    for i, fold in enumerate(folds):
        others = [f for j, f in enumerate(folds) if j != i]
        rest = pooled(others)
        use = modes_win(cross_fitted(targets, others, coverage)["scores"],
                        score_table(rest["measured"], rest["inspector"], list(targets)))
        p = fold["inspector"]
        if use:
            cal = calibrate(targets, rest["measured"], rest["inspector"], rest["roofline"], families=(), coverage=coverage)
            p = cal.join(fold["inspector"], fold["roofline"], targets)
        chosen.append("modes" if use else "as is")
        measured.append(fold["measured"]), predicted.append(np.clip(p, 0, None))
    return {"scores": score_table(np.concatenate(measured), np.concatenate(predicted), list(targets)),
            "chosen": chosen}
