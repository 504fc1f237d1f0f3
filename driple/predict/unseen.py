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
- ``modes``: optionally, per duration target, how a roofline joins the inspector's
  prediction *as it is* (``"inspector"``: unchanged; ``"roofline"``; ``"mean"``, geometric),
  chosen on the same held-out jobs (the intervals then calibrated with them applied). A mode
  ``"roofline:<variant>"`` / ``"mean:<variant>"`` names one of the calibration's own rooflines
  (``rooflines``: :data:`ROOFLINE_VARIANTS`, each fitted on the inspector's training jobs; the
  one the modes were chosen with, so that what is applied is what was measured); a bare
  ``"roofline"`` / ``"mean"`` (older checkpoints) the inspector's own roofline. Shipped
  for a setting only where they win cross-fitted (:func:`modes_win`), the rule
  :func:`nested_choice` measures; empty otherwise.

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
#: The rooflines an unseen-family calibration may join (:mod:`driple.inspector.roofline`): its
#: terms and whether the overlap of communication and compute is fitted. Chosen per duration on
#: held-out families; the physical terms carry better to a new family's step time.
ROOFLINE_VARIANTS = {"all": {"terms": "all", "overlap": False},
                     "all-overlap": {"terms": "all", "overlap": True},
                     "physical": {"terms": "physical", "overlap": False},
                     "physical-overlap": {"terms": "physical", "overlap": True}}
#: The variant key of the inspector's own roofline (a bare mode ``"roofline"`` or ``"mean"``).
OWN = ""


def split_mode(mode: str) -> tuple:
    """``"mean:physical"`` -> ``("mean", "physical")``; ``"mean"`` -> ``("mean", OWN)``."""
    how, _, variant = str(mode).partition(":")
    return how, variant


class UnseenFamilyCalibration:
    """Roofline modes and intervals for jobs of unseen families (module docstring).

    Args:
        modes: ``{duration target: mode}`` over the inspector's prediction as it is.
        intervals: :class:`~driple.predict.intervals.ConformalIntervals` (or its dict).
        families: The families the inspector trained on (a job of any other is unseen).
        source: Where the calibration came from (file, date, command).
    """

    def __init__(self, modes: dict, intervals, families: Sequence[str], source: Optional[dict] = None,
                 rooflines: Optional[Mapping] = None):
        from driple.inspector.roofline import MODES, RooflineMember
        from driple.predict.intervals import ConformalIntervals

        self.rooflines = {str(v): m if isinstance(m, RooflineMember) else RooflineMember.from_state(m)
                          for v, m in (rooflines or {}).items()}
        # rooflines=None: modes measured on predictions only (cross-fitting), no member to check
        known = None if rooflines is None else (OWN, *self.rooflines)
        bad = sorted(m for m in modes.values() if split_mode(m)[0] not in MODES
                     or (known is not None and split_mode(m)[1] not in known))
        if bad:
            raise DripleError(f"unknown roofline mode(s) {', '.join(bad)}; choose among {', '.join(MODES)}"
                              + (f" (or with :{'/:'.join(self.rooflines)})" if self.rooflines else ""))
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

    def roofline_predictions(self, graphs: Sequence, own=None) -> dict:
        """``{variant: [n, targets]}`` of the rooflines the modes join: the calibration's own
        members, and ``own`` (the inspector's roofline member) for a bare mode."""
        used = {split_mode(m)[1] for m in self.joined.values()}
        out = {v: self.rooflines[v].predict(graphs) for v in used if v != OWN}
        if OWN in used and own is not None:
            out[OWN] = own.predict(graphs)
        return out

    def join(self, predicted: np.ndarray, roofline, targets: Sequence[str]) -> np.ndarray:
        """``predicted`` ``[n, targets]`` (the inspector as it is) with the modes applied, each
        from ``roofline`` (``{variant: [n, targets]}``, :meth:`roofline_predictions`; an array:
        the one roofline of bare modes); a mode whose roofline is missing is left out."""
        return join_modes(predicted, roofline, targets, self.joined)

    def to_dict(self) -> dict:
        out = self.describe()
        if self.rooflines:  # absent: bare modes only (older checkpoints read the same)
            out["rooflines"] = {v: m.to_state() for v, m in self.rooflines.items()}
        return out

    def describe(self) -> dict:
        """:meth:`to_dict` for a profile or ``driple settings``: the rooflines by name and
        what they were fitted on (terms, overlap), not their rates."""
        out = {"modes": self.modes, "intervals": self.intervals.to_dict(),
               "families": list(self.families), "source": self.source}
        if self.rooflines:  # their rates are not serialized only to be replaced
            out["rooflines"] = {v: {"terms": sorted(set(m.terms.values())) or ["all"],
                                    "overlap": bool(m.overlap)} for v, m in self.rooflines.items()}
        return out

    @classmethod
    def from_dict(cls, record: dict) -> "UnseenFamilyCalibration":
        try:
            return cls(record["modes"], record["intervals"], record["families"], record.get("source"),
                       record.get("rooflines") or {})
        except (KeyError, TypeError, ValueError) as err:
            raise DripleError(f"the unseen-family calibration is damaged ({type(err).__name__}: {err})") from None


def joined_modes(modes: Optional[Mapping]) -> dict:
    """The modes of ``{target: mode}`` that change a prediction (not ``"inspector"``)."""
    return {t: m for t, m in (modes or {}).items() if m != "inspector"}


def _by_variant(roofline) -> dict:
    """``{variant: predictions}`` of a dict, or of one array (the roofline of bare modes)."""
    return dict(roofline) if isinstance(roofline, Mapping) else {OWN: roofline}


def join_modes(predicted: np.ndarray, roofline, targets: Sequence[str], modes: Mapping) -> np.ndarray:
    """``predicted`` ``[n, targets]`` with each mode of ``modes`` applied from its variant's
    predictions in ``roofline`` (``{variant: [n, targets]}`` or one array for bare modes); a
    mode whose roofline is absent is left out."""
    from driple.inspector.roofline import apply_modes

    out = np.asarray(predicted, dtype=np.float64)
    rooflines = _by_variant(roofline)
    for variant, r in rooflines.items():
        if r is None:
            continue
        mine = {t: split_mode(m)[0] for t, m in joined_modes(modes).items() if split_mode(m)[1] == variant}
        if mine:
            out = apply_modes(out, np.asarray(r, dtype=np.float64), targets, mine)
    return out


def choose_joined_modes(targets: Sequence[str], inspector: np.ndarray, roofline, measured: np.ndarray) -> dict:
    """Per duration target, the lowest-MAPE way to predict it on these jobs: the inspector as it
    is, or any roofline of ``roofline`` (``{variant: [n, targets]}``, or one array) replacing it
    or averaged with it (geometric); ``"inspector"`` on ties and where nothing is measured
    (:func:`driple.inspector.roofline.choose_among`)."""
    from driple.inspector.roofline import choose_among

    return choose_among(targets, inspector, _by_variant(roofline), measured)


def pooled(folds: Sequence[dict]) -> dict:
    """The ``measured``, ``inspector`` and ``roofline`` arrays of held-out folds, concatenated
    (``roofline`` per variant when the folds hold ``{variant: array}``)."""
    out = {k: np.concatenate([f[k] for f in folds]) for k in ("measured", "inspector")}
    if isinstance(folds[0]["roofline"], Mapping):
        out["roofline"] = {v: np.concatenate([f["roofline"][v] for f in folds]) for v in folds[0]["roofline"]}
    else:
        out["roofline"] = np.concatenate([f["roofline"] for f in folds])
    return out


def calibrate(targets: Sequence[str], measured: np.ndarray, inspector: np.ndarray, roofline,
              families: Sequence[str], coverage: float = 0.9,
              source: Optional[dict] = None, rooflines: Optional[Mapping] = None) -> UnseenFamilyCalibration:
    """Modes chosen and intervals calibrated on held-out-family jobs: their ``measured``
    targets and the ``inspector``'s and ``roofline``'s predictions ``[n, targets]`` (each
    from models that had not seen the job's family; ``roofline`` one array, or ``{variant:
    array}`` with ``rooflines`` the members of those variants fitted to ship);
    ``families`` the shipped inspector's."""
    from driple.predict.intervals import ConformalIntervals

    measured, inspector = (np.asarray(a, dtype=np.float64) for a in (measured, inspector))
    roofline = {v: np.asarray(r, dtype=np.float64) for v, r in _by_variant(roofline).items()}
    if list(roofline) == [OWN]:
        roofline = roofline[OWN]
    modes = choose_joined_modes(targets, inspector, roofline, measured)
    joined = join_modes(inspector, roofline, targets, modes)
    intervals = ConformalIntervals(coverage=coverage, names=list(targets)).fit(measured, np.clip(joined, 0, None))
    used = {split_mode(m)[1] for m in joined_modes(modes).values()} - {OWN}
    return UnseenFamilyCalibration(modes, intervals, families, source,
                                   None if rooflines is None else {v: m for v, m in rooflines.items() if v in used})


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


#: How modes are judged against the inspector as it is (:func:`rule_score`): the median MAPE
#: over every target (the rule shipped), or the mean or median over the targets
#: a roofline can change (its durations and the step time).
RULES = ("median", "duration-mean", "duration-median")


def rule_score(scores: Mapping, rule: str = "median") -> float:
    """A score table's figure under ``rule`` of :data:`RULES` (lower is better)."""
    from driple.inspector.roofline import is_duration
    from driple.inspector.scores import table_summary

    if rule == "median":
        return table_summary(scores)["mape_median"]
    if rule not in RULES:
        raise DripleError(f"unknown rule {rule!r}; choose among {', '.join(RULES)}")
    values = [v["mape"] for t, v in scores.items() if is_duration(t) and v.get("mape") is not None]
    return float(np.mean(values) if rule == "duration-mean" else np.median(values))


def modes_win(cross_fitted_scores: Mapping, as_is_scores: Mapping, rule: str = "median") -> bool:
    """Whether joining the roofline for unseen families is worth it: the modes measured
    cross-fitted (:func:`cross_fitted`) score lower under ``rule`` (default: the median
    per-target MAPE) than the inspector as it is on the same held-out jobs (score tables of
    :func:`~driple.inspector.scores.score_table`)."""
    return rule_score(cross_fitted_scores, rule) < rule_score(as_is_scores, rule)


def modes_ship(family: Mapping) -> bool:
    """The shipping rule for an evaluation's family split (``accuracy.json``'s ``family`` entry):
    its roofline modes for unseen families (``unseen_modes``) exist and :func:`modes_win` over
    the inspector as it is (``scores["inspector"]``)."""
    unseen = family.get("unseen_modes") or {}
    inspector = (family.get("scores") or {}).get("inspector")
    return "calibration" in unseen and inspector is not None and modes_win(unseen["cross_fitted"]["scores"], inspector)


def best_option(targets: Sequence[str], options: Mapping[str, Sequence[dict]], coverage: float = 0.9,
                rule: str = "median") -> tuple:
    """Of ``options`` (``{name: folds}``: the same held-out jobs, each with other rooflines), the
    one whose modes win (:func:`modes_win` under ``rule``) by the lowest cross-fitted score, or
    None when none beats the inspector as it is; returns ``(name or None, {name: cross_fitted(...)})``."""
    from driple.inspector.scores import score_table

    checks = {name: cross_fitted(targets, folds, coverage) for name, folds in options.items()}
    first = pooled(next(iter(options.values())))
    as_is = score_table(first["measured"], first["inspector"], list(targets))
    winners = [n for n in checks if modes_win(checks[n]["scores"], as_is, rule)]
    best = min(winners, key=lambda n: rule_score(checks[n]["scores"], rule), default=None)
    return best, checks


def nested_choice(targets: Sequence[str], folds, coverage: float = 0.9, rule: str = "median") -> dict:
    """Whether (and with which rooflines) to join a roofline for unseen families, decided
    without looking at the family it is measured on: for each fold, :func:`best_option` on the
    *other* folds alone; the modes of the winner (chosen on the other folds) are then applied to
    the fold, none if nothing won there. ``folds``: one list of folds, or ``{option: folds}``.
    Needs 4 folds or more. Returns ``{"scores"`` (pooled over the folds), ``"chosen"`` (per
    fold: ``"modes"`` (one option) or the option's name, or ``"as is"``), ``"predicted"`` (the
    folds' rows in order)``}``."""
    from driple.inspector.scores import score_table

    options = dict(folds) if isinstance(folds, Mapping) else {"modes": folds}
    n = len(next(iter(options.values())))
    if n < 4:
        raise DripleError("a nested choice over families needs at least 4 family folds")
    measured, predicted, chosen = [], [], []
    for i in range(n):
        others = {name: [f for j, f in enumerate(fs) if j != i] for name, fs in options.items()}
        use, _ = best_option(targets, others, coverage, rule)
        fold = next(iter(options.values()))[i]
        p = fold["inspector"]
        if use is not None:
            rest = pooled(others[use])
            cal = calibrate(targets, rest["measured"], rest["inspector"], rest["roofline"], families=(), coverage=coverage)
            p = cal.join(fold["inspector"], options[use][i]["roofline"], targets)
        chosen.append("as is" if use is None else use)
        measured.append(fold["measured"]), predicted.append(np.clip(p, 0, None))
    return {"scores": score_table(np.concatenate(measured), np.concatenate(predicted), list(targets)),
            "chosen": chosen, "predicted": np.concatenate(predicted)}
