"""The per-op-class roofline (:mod:`driple.inspector.roofline`) as an estimator of its own, and
joined into another estimator per duration target as the shipped inspector joins it (what the
evaluation retrains per fold)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.estimators import Estimator, graphs_of, positions
from driple.inspector.graph_inputs import stack_graph_features
from driple.inspector.roofline import fit_member


class RooflineEstimator(Estimator):
    """The per-op-class roofline of every duration target and the step time (module docstring);
    NaN for the amounts.

    Args:
        host: Host figures the terms divide by (default: as for training an inspector,
            :func:`driple.inspector.train.training_host`).
        overlap: Also fit the fraction of the shorter of compute and communication hidden under
            the other (:func:`~driple.inspector.roofline.fit_overlap`; named ``roofline-overlap``).
        terms: The term set of :data:`~driple.inspector.roofline.TERMS` (``"physical"``: named
            ``roofline-physical``; with both, ``roofline-physical-overlap``).

    Learned attributes: ``member_`` (the fitted :class:`~driple.inspector.roofline.RooflineMember`),
    ``weights_`` (its ``{target: [w...]}``), ``host_``, ``setting_``.
    """

    name = "roofline"

    def __init__(self, host=None, overlap: bool = False, terms: str = "all", messages: bool = True):
        self.host, self.overlap, self.terms, self.messages = host, bool(overlap), terms, bool(messages)
        # as the registry names them: roofline[-physical][-overlap]
        self.name = "roofline" + (f"-{terms}" if terms != "all" else "") + ("-overlap" if self.overlap else "")

    def fit(self, dataset, train: Sequence[int], val: Sequence[int] = ()) -> "RooflineEstimator":
        from driple.inspector.train import common_attribute, training_host

        train = positions(dataset, train)
        graphs = graphs_of(dataset, train)
        self.host_ = training_host(dataset, self.host)
        self.setting_ = getattr(dataset, "setting", None) or common_attribute(graphs, "setting")
        if not self.setting_:
            raise DripleError("the roofline needs the setting the jobs ran in")
        self.member_ = fit_member(stack_graph_features(graphs),
                                  np.asarray(dataset.targets, dtype=np.float64)[train],
                                  list(dataset.target_names), self.setting_, self.host_,
                                  overlap=self.overlap, terms=self.terms, messages=self.messages)
        return self

    @property
    def weights_(self) -> dict:
        return self.member_.weights

    def predict(self, dataset, idx: Optional[Sequence[int]] = None) -> np.ndarray:
        graphs = graphs_of(dataset, idx)
        if not graphs:
            return np.full((0, len(self.member_.targets)), np.nan)
        return self.member_.predict(graphs)


class WithRoofline(Estimator):
    """An estimator with a roofline fitted on the same training jobs, joined per duration target
    as chosen on the fold's validation jobs (what :func:`with_roofline` does to a checkpoint):
    the shipped inspector's configuration, trained again per fold by the evaluation (the
    roofline with its overlap, as :func:`with_roofline` fits it)."""

    def __init__(self, inner: Estimator, host=None, name: Optional[str] = None, overlap: bool = True):
        self.inner, self.host, self.overlap = inner, host, overlap
        self.name = name or f"{inner.name}+roofline"

    @property
    def note_(self) -> Optional[str]:
        return getattr(self.inner, "note_", None)

    def fit(self, dataset, train, val) -> "WithRoofline":
        self.inner.fit(dataset, train, val)
        val = positions(dataset, val) if len(val) else []
        # the inner estimator's own validation predictions, kept: with them (and its test ones) a
        # new roofline can be joined again without retraining it (rejoin)
        self.inner_val_ = self.inner.predict(dataset, val) if val else np.zeros((0, len(dataset.target_names)))
        self.member_ = fit_joined(dataset, train, val, self.inner_val_, self.host, overlap=self.overlap)
        return self

    def predict(self, dataset, idx=None) -> np.ndarray:
        return self.predict_parts(dataset, idx)[1]

    def predict_parts(self, dataset, idx=None) -> tuple:
        """``(inner, joined)``: the inner estimator's own predictions and the joined ones, from
        one pass of it (an evaluation keeps both, :func:`rejoin` needs the first)."""
        inner = self.inner.predict(dataset, idx)
        return inner, self.member_.combine(inner, graphs_of(dataset, idx))


def fit_joined(dataset, train: Sequence[int], val: Sequence[int], inner_val: np.ndarray, host,
               overlap: bool = True, terms: str = "all", messages: bool = True):
    """A roofline fitted on the ``train`` jobs of ``dataset``, each duration's mode chosen on the
    ``val`` jobs against the inner estimator's predictions there (``inner_val``): how
    :class:`WithRoofline` joins it, and :func:`rejoin` joins it again."""
    member = RooflineEstimator(host=host, overlap=overlap, terms=terms, messages=messages).fit(dataset, train).member_
    if len(val):
        member.choose(np.asarray(inner_val, dtype=np.float64), graphs_of(dataset, val),
                      np.asarray(dataset.targets, dtype=np.float64)[list(val)])
    return member


def rejoin(dataset, folds: Sequence[dict], host, overlap: bool = True, terms: str = "all",
           messages: bool = True) -> list:
    """The inspector's predictions of each fold's test jobs with a roofline fitted again
    (``overlap``, ``terms``) and joined as :class:`WithRoofline` joins it, its network *not*
    retrained: each fold (``{"train_job_ids", "val_job_ids", "test_job_ids", "val", "test"}``, the
    network's own predictions an evaluation kept, :func:`driple.inspector.evaluate.run_folds`)
    gets a roofline fitted on its training jobs of ``dataset``, the modes chosen on its validation
    jobs with the network's validation predictions, applied to its test predictions. Seconds where
    retraining the networks takes hours. Returns ``[n_test, targets]`` per fold."""
    index = {j: i for i, j in enumerate(dataset.job_ids)}

    def where(ids, what):
        missing = [j for j in ids if j not in index]
        if missing:
            raise DripleError(f"{len(missing)} {what} job(s) of the evaluation are not in {getattr(dataset, 'root', 'the dataset')} "
                              f"(e.g. {missing[0]}): rejoin on the dataset the evaluation read")
        return [index[j] for j in ids]

    out = []
    for fold in folds:
        train, val = where(fold["train_job_ids"], "training"), where(fold["val_job_ids"], "validation")
        test = where(fold["test_job_ids"], "test")
        member = fit_joined(dataset, train, val, fold["val"], host, overlap=overlap, terms=terms, messages=messages)
        out.append(member.combine(np.asarray(fold["test"], dtype=np.float64), graphs_of(dataset, test)))
    return out
