"""An inspector and its members as one checkpoint: fitting the tree member and the roofline.

The tree member is :class:`~driple.inspector.baselines.HGBPriors` fitted on the inspector's own
training jobs (iterations chosen on its validation jobs); :mod:`driple.inspector.trees` stores
it and :meth:`~driple.inspector.checkpoint.TrainedInspector.predict` averages it in. The
roofline (:mod:`driple.inspector.roofline`) is fitted on the same jobs and joined per duration
target as chosen on the validation jobs.
"""
from __future__ import annotations

import copy
from typing import Sequence

from driple.inspector.baselines import HGBPriors
from driple.inspector.train import score_split, training_host
from driple.inspector.trees import TreeMember


def fit_member(train: Sequence, val: Sequence, targets: Sequence[str], setting: str, host,
               random_state: int = 0) -> TreeMember:
    """A :class:`TreeMember` fitted on the graphs ``train`` (with ``y``), iterations chosen on
    ``val`` (may be empty)."""
    est = HGBPriors(random_state=random_state, host=host).fit_graphs(train, val, targets, setting)
    models = []
    for model, n in zip(est.model_.models_, est.model_.n_iter_):
        if not isinstance(model, float):
            model._predictors = model._predictors[:n]  # predict() is staged_predict at n now
        models.append(model)
    return TreeMember(est.inputs_, targets, est.target_prior_names_, est.prior_eps_, est.model_.eps_, models)


def with_trees(inspector, dataset, split, random_state: int = 0):
    """A copy of ``inspector`` (sharing its network) with a tree member fitted on the split's
    training jobs attached, scored again on the split (``info["scores"]``)."""
    host = inspector.host or training_host(dataset)
    member = fit_member([dataset[i] for i in split.train], [dataset[i] for i in split.val],
                        inspector.targets, dataset.setting, host, random_state=random_state)
    out = copy.copy(inspector)
    out.info = dict(inspector.info)
    out.attach_trees(member)
    out.info["scores"] = score_split(out, dataset, split)
    return out


def fit_roofline(inspector, dataset, split, overlap: bool = False, terms: str = "all", messages: bool = True):
    """A :class:`~driple.inspector.roofline.RooflineMember` fitted on the split's training jobs of
    ``dataset`` for ``inspector``'s targets, divided by its host figures (else the dataset's), every
    mode ``"inspector"``: the one way a roofline is fitted for a checkpoint, whether it joins the
    seen-family prediction (:func:`with_roofline`) or an unseen family's
    (``scripts/calibrate_unseen_families.py``); ``messages``: with the cost per message
    (:func:`~driple.inspector.roofline.term_columns`)."""
    from driple.inspector.graph_inputs import stack_graph_features, stack_targets
    from driple.inspector.roofline import fit_member

    train = [dataset[i] for i in split.train]
    return fit_member(stack_graph_features(train), stack_targets(train), inspector.targets,
                      dataset.setting, inspector.host or training_host(dataset), overlap=overlap, terms=terms,
                      messages=messages)


def with_roofline(inspector, dataset, split, overlap: bool = True):
    """A copy of ``inspector`` (sharing its network and tree member) with a roofline fitted on the
    split's training jobs attached (with ``overlap``: communication partly hidden under compute,
    :func:`~driple.inspector.roofline.fit_overlap`), each duration's mode chosen on its
    validation jobs, scored again on the split (``info["scores"]``)."""
    from driple.inspector.graph_inputs import stack_targets

    member = fit_roofline(inspector, dataset, split, overlap=overlap)
    val = [dataset[i] for i in split.val]
    out = copy.copy(inspector)
    out.info = dict(inspector.info)
    out.attach_roofline(None)
    if val:
        member.choose(out.predict(val), val, stack_targets(val))
    out.attach_roofline(member)
    out.info["scores"] = score_split(out, dataset, split)
    return out
