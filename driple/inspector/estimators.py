"""One interface for everything the evaluation compares: baselines and graph models alike.

An :class:`Estimator` predicts a dataset's targets (``dataset.target_names``, raw units) for
some of its jobs:

- ``fit(dataset, train, val) -> self``: fit on the jobs at positions ``train``; ``val`` is for
  early stopping and choices only, never fitted on. Nothing else of the split is passed, so an
  estimator cannot look at calibration or test jobs.
- ``predict(dataset, idx=None) -> ndarray [len(idx), targets]``: predictions for the jobs at
  ``idx`` (default: all) of ``dataset`` — the fitted one, or another with the same targets.
- ``note_``: said beside its scores (e.g. ``"family seen in source"``), or None.

:class:`EnsembleEstimator` averages members in log space. Graph models here: :class:`GNNEstimator` (:func:`~driple.inspector.train.train_inspector`,
an inspector of any configuration trained from scratch), :class:`TransferEstimator` (fine-tuned from a source
inspector, optionally retrained without what the fold holds out) and
:class:`CheckpointEstimator` (a trained inspector as it is). The baselines are in
:mod:`driple.inspector.baselines`.

Estimators are made by name in :mod:`driple.inspector.estimator_registry`.
"""
from __future__ import annotations

import json
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.inspector.splits import Split


class Estimator:
    """Base of the estimators compared by :mod:`driple.inspector.evaluate` (see the module doc)."""

    name = "estimator"
    note_: Optional[str] = None

    def fit(self, dataset, train: Sequence[int], val: Sequence[int]) -> "Estimator":
        raise NotImplementedError

    def predict(self, dataset, idx: Optional[Sequence[int]] = None) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.name!r})"


def positions(dataset, idx: Optional[Sequence[int]]) -> list[int]:
    """``idx`` as a list of ints, or every position of ``dataset``."""
    return list(range(len(dataset))) if idx is None else [int(i) for i in idx]


def graphs_of(dataset, idx: Optional[Sequence[int]]) -> list:
    return [dataset[i] for i in positions(dataset, idx)]


def _fit_split(train: Sequence[int], val: Sequence[int]) -> Split:
    """The split a training function is given: train and val only (nothing to score on)."""
    return Split("fit", train=[int(i) for i in train], val=[int(i) for i in val], test=[])


# ---------------------------------------------------------------------- training cache
def _dataset_id(dataset) -> str:
    return str(getattr(dataset, "key", None) or getattr(dataset, "root", id(dataset)))


def training_key(dataset, train: Sequence[int], val: Sequence[int], what: dict) -> str:
    """Identifies one training run: same dataset rows, same jobs, same model and options."""
    ids = dataset.job_ids
    return json.dumps({"dataset": _dataset_id(dataset), "train": sorted(ids[i] for i in train),
                       "val": sorted(ids[i] for i in val), "what": what}, sort_keys=True, default=str)


# ---------------------------------------------------------------------- graph models
class GNNEstimator(Estimator):
    """The inspector trained from scratch on the fold (:func:`~driple.inspector.train.train_inspector`).

    Args:
        options: :class:`~driple.inspector.train.TrainOptions` (default: its defaults).
        progress: Show training progress bars.
        cache: A dict shared between estimators: a training already done with the same jobs,
            model and options is reused (e.g. a source setting's family fold, retrained again as
            a transferred inspector's source).
        config: An :class:`~driple.inspector.train.InspectorConfig` (which network: the
            paper's GNN, the hybrid, features only; e.g. from
            :func:`~driple.inspector.train.preset`); None: the paper's GNN built from
            ``model_kwargs``.
        host: Host figures for the priors of the hybrid and features-only networks (default:
            :func:`~driple.inspector.train.training_host`).
        **model_kwargs: Passed to ``train_inspector`` without a ``config`` (``hidden_channels``,
            ``num_repeats``, ``set2set_steps``, ``dropout``, ``graph_attr``, ...).
    """

    name = "gnn"

    def __init__(self, options=None, progress: bool = False, cache: Optional[dict] = None,
                 name: Optional[str] = None, config=None, host=None, **model_kwargs):
        from driple.inspector.train import TrainOptions

        if config is not None and model_kwargs:
            raise ValueError("give the network as config or as model keyword arguments, not both")
        self.options = options or TrainOptions()
        self.progress = progress
        self.cache = cache
        self.config = config
        self.host = host
        self.model_kwargs = model_kwargs
        if name:
            self.name = name

    @classmethod
    def from_checkpoint(cls, trained, options=None, overrides: Optional[dict] = None, **kwargs):
        """An estimator that trains what ``trained`` (a
        :class:`~driple.inspector.checkpoint.TrainedInspector`) is: its recorded configuration
        (:func:`~driple.inspector.train.retrain_config`), training options with ``overrides``
        applied, and host figures (the priors of a hybrid divide by them)."""
        from driple.inspector.train import recorded_options, retrain_config

        config, _ = retrain_config(trained)
        kwargs.setdefault("host", trained.host)
        return cls(options=options or recorded_options(trained, overrides), config=config, **kwargs)

    def fit(self, dataset, train, val) -> "GNNEstimator":
        from driple.inspector.train import train_inspector

        what = self.config.to_dict() if self.config is not None else {"gnn": self.model_kwargs}
        key = training_key(dataset, train, val, {"model": what, "options": self.options.to_dict()})
        if self.cache is not None and key in self.cache:
            self.inspector_ = self.cache[key]
            return self
        if self.config is not None:
            self.inspector_ = train_inspector(dataset[list(train)], dataset[list(val)] if len(val) else None,
                                              self.options, self.config, host=self.host,
                                              progress=self.progress)
        else:
            self.inspector_ = train_inspector(dataset, _fit_split(train, val), options=self.options,
                                              progress=self.progress, **self.model_kwargs)
        if self.cache is not None:
            self.cache[key] = self.inspector_
        return self

    def predict(self, dataset, idx=None) -> np.ndarray:
        return self.inspector_.predict(graphs_of(dataset, idx))


class EnsembleEstimator(Estimator):
    """The geometric mean of its members' predictions (each fitted on the same jobs): errors of
    a graph network and of trees on the same inputs are not the same, and in log space (where
    every target is fitted) their mean is the natural average. A member's NaN target is left
    out of that target's mean."""

    def __init__(self, members: Sequence[Estimator], name: Optional[str] = None):
        if len(members) < 2:
            raise DripleError("an ensemble needs at least two members")
        self.members = list(members)
        self.name = name or "+".join(m.name for m in self.members)

    def fit(self, dataset, train, val) -> "EnsembleEstimator":
        for member in self.members:
            member.fit(dataset, train, val)
        return self

    @property
    def note_(self) -> Optional[str]:
        """The members' notes (e.g. a transferred member's "family seen in source")."""
        notes = [m.note_ for m in self.members if getattr(m, "note_", None)]
        return "; ".join(notes) if notes else None

    def predict(self, dataset, idx=None) -> np.ndarray:
        from driple.inspector.trees import geometric_mean  # the shipped ensemble's own average

        return geometric_mean(*(m.predict(dataset, idx) for m in self.members))


class CheckpointEstimator(Estimator):
    """A trained inspector as it is: ``fit`` trains nothing. ``note`` is said beside its scores."""

    name = "inspector"

    def __init__(self, trained, note: Optional[str] = None):
        self.inspector_ = trained
        self.note_ = note

    def fit(self, dataset, train, val) -> "CheckpointEstimator":
        self.inspector_.check_compatible(dataset.feature_set, dataset.vocab_digest,
                                         what=f"dataset {getattr(dataset, 'root', '')}")
        return self

    def predict(self, dataset, idx=None) -> np.ndarray:
        return self.inspector_.predict(graphs_of(dataset, idx))


class TransferEstimator(Estimator):
    """Fine-tuned from a source inspector on the fold's jobs (:func:`~driple.inspector.transfer.finetune`).

    With ``source_dataset`` and ``source_split``, the source is first retrained from scratch
    (its own configuration and options) on ``source_split.train`` with early stopping on
    ``source_split.val``: the source jobs that the fold does not hold out (see
    :func:`driple.inspector.evaluate.source_split_for`). That costs one source training per
    fold (shared through ``cache``). Without them the given source is used as it is and
    ``note`` says what it has seen.
    """

    name = "inspector"

    def __init__(self, source, scheme: str = "paper", options=None, source_dataset=None,
                 source_split=None, note: Optional[str] = None, overrides: Optional[dict] = None,
                 progress: bool = False, cache: Optional[dict] = None):
        if (source_dataset is None) != (source_split is None):
            raise ValueError("pass both source_dataset and source_split to retrain the source, or neither")
        self.source = source
        self.scheme = scheme
        self.options = options
        self.source_dataset = source_dataset
        self.source_split = source_split
        self.note = note
        self.overrides = overrides
        self.progress = progress
        self.cache = cache

    def fit(self, dataset, train, val) -> "TransferEstimator":
        from driple.inspector.transfer import finetune, finetune_options

        source = self.source
        if self.source_dataset is not None:
            gnn = GNNEstimator.from_checkpoint(self.source, overrides=self.overrides,
                                               progress=self.progress, cache=self.cache)
            source = gnn.fit(self.source_dataset, self.source_split.train, self.source_split.val).inspector_
        self.source_ = source
        self.note_ = self.note
        options = self.options or finetune_options(self.source, self.overrides)
        self.inspector_ = finetune(source, dataset, split=_fit_split(train, val), scheme=self.scheme,
                                   options=options, progress=self.progress)
        return self

    def predict(self, dataset, idx=None) -> np.ndarray:
        return self.inspector_.predict(graphs_of(dataset, idx))
