"""Transfer learning: move an inspector trained in one setting to another with little data.

Schemes (what is trained on the target setting's jobs):

- ``"paper"`` — Driple's scheme: the repeated layer φr is split; repetitions ``k < K/2`` keep
  the source φr frozen, repetitions ``k >= K/2`` use a trainable copy φr' initialised from it;
  the MLP head is trainable. φf, the GRU and Set2Set stay frozen.
- ``"mlp"`` — what Driple's public code does: only the MLP head is trained.
- ``"scratch"`` — a fresh inspector of the same configuration, everything trained.

The frozen part computes the same thing every epoch, so by default its output is computed once
per graph and fine-tuning trains only the rest (:class:`TrainableTail`): group states after
repetition K/2 for ``"paper"``, Set2Set graph embeddings for ``"mlp"``. Same result, less time.

The source's feature scaling is kept (its frozen layers expect it); the target scaling is
refitted on the target's training jobs (the head is trainable and the target setting's
metrics have their own ranges).
"""
from __future__ import annotations

import copy
import time
from dataclasses import replace

import numpy as np
import torch

from driple.errors import DripleError
from driple.inspector.checkpoint import TrainedInspector
from driple.inspector.graph_inputs import GraphInputs, stack_graph_features, stack_targets
from driple.inspector.model import Inspector, NetworkEnsemble, build_model, members_of
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.inspector.splits import Split, random_split
from driple.inspector.train import (TrainOptions, feature_names_for, fit, joined_history, recorded_host,
                                    recorded_options, score_split)

SCHEMES = ("paper", "mlp", "scratch")


def default_scheme(source) -> str:
    """The paper's scheme for a source with graph layers; ``"mlp"`` (all of it tuned) for a
    features-only one, which has none to split."""
    return "paper" if getattr(source.model, "reads_graph", True) else "mlp"


def freeze_for_transfer(model: Inspector, scheme: str = "paper") -> Inspector:
    """Set ``requires_grad`` for ``scheme`` (in place; ``"paper"`` first adds φr'; an ensemble:
    in each member); returns it."""
    if scheme not in SCHEMES:
        raise DripleError(f"unknown transfer scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    if isinstance(model, NetworkEnsemble):
        for member in model.members:
            freeze_for_transfer(member, scheme)
        return model
    if scheme == "scratch":
        model.reset_parameters()
        model.requires_grad_(True)
        return model
    if scheme == "paper" and not getattr(model, "reads_graph", True):
        raise DripleError("a features-only inspector has no graph layers: use scheme 'mlp' or 'scratch'")
    if scheme == "paper" and model.conv_repeat_tuned is None:
        model.split_repeats()
    model.requires_grad_(False)
    model.mlp.requires_grad_(True)
    if scheme == "paper":
        model.conv_repeat_tuned.requires_grad_(True)
    return model


def trainable_parameters(model: torch.nn.Module) -> int:
    """Number of scalars that an optimiser would update."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class TrainableTail(torch.nn.Module):
    """The trainable end of a frozen-prefix :class:`Inspector`, fed with cached prefix outputs.

    With ``start`` an int, the input ``x`` is the group states after ``start`` repetitions and
    the tail runs the remaining repetitions and the readout; with ``start=None`` the input is
    the Set2Set graph embedding ``[B, 2 * hidden]`` and the tail is the MLP head.
    """

    def __init__(self, model: Inspector, start: int | None):
        super().__init__()
        self.model = model
        self.start = start

    def forward(self, x, edge_index, edge_weight=None, batch=None, batch_size=None, graph_attr=None):
        if self.start is None:
            return self.model.head(x, graph_attr)
        adj_t = self.model.propagation_matrix(edge_index, edge_weight, x.size(0), x.dtype)
        return self.model.readout(self.model.propagate(x, adj_t, self.start), batch, batch_size,
                                  graph_attr)


@torch.no_grad()
def cache_frozen(model: Inspector, prepared: list, scheme: str) -> tuple[TrainableTail, list]:
    """Run the frozen prefix of ``scheme`` once per graph; returns the tail and its inputs."""
    from torch_geometric.data import Data
    from torch_geometric.loader import DataLoader

    if scheme not in ("paper", "mlp"):
        raise ValueError(f"scheme {scheme!r} has no frozen prefix")
    start = model.tuned_from if scheme == "paper" else None
    model.eval()
    cached = []
    for batch in DataLoader(list(prepared), batch_size=64):
        adj_t = model.propagation_matrix(batch.edge_index, batch.edge_weight, batch.num_nodes)
        h = model.encode(batch.x, adj_t)
        if start is not None:
            h = model.propagate(h, adj_t, 0, start)
        else:
            z = model.pool(model.propagate(h, adj_t), batch.batch, batch.num_graphs)
        for i, data in enumerate(batch.to_data_list()):
            if start is not None:
                item = Data(x=h[batch.ptr[i]:batch.ptr[i + 1]], edge_index=data.edge_index,
                            edge_weight=data.edge_weight, num_nodes=data.num_nodes)
            else:
                item = Data(x=z[i:i + 1], edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=1)
            for key in ("y", "graph_attr"):
                if getattr(data, key, None) is not None:
                    item[key] = data[key]
            cached.append(item)
    return TrainableTail(model, start), cached


def subsample(split: Split, fraction: float, seed: int = 0) -> Split:
    """Keep ``fraction`` of the training and validation jobs (at least one each); calibration and
    test stay."""
    if not 0 < fraction <= 1:
        raise DripleError(f"fraction must be in (0, 1] (got {fraction})")
    rng = np.random.default_rng(seed)

    def take(idx):
        if not idx:
            return []
        n = max(1, int(round(fraction * len(idx))))
        return sorted(rng.permutation(idx)[:n].tolist())

    return replace(split, train=take(split.train), val=take(split.val))


def finetune_options(source, overrides: dict | None = None) -> TrainOptions:
    """The source's recorded training options with ``overrides``, but no moving average of the
    weights unless asked (``ema`` is a decay per optimizer step: a few target jobs make one step
    per epoch, and an average of 0.995 would hardly leave its start before early stopping)."""
    return recorded_options(source, {"ema": 0.0, **(overrides or {})})


def finetune(
    source: TrainedInspector,
    dataset,
    fraction: float = 1.0,
    scheme: str = "paper",
    split: Split | None = None,
    options: TrainOptions | None = None,
    progress: bool = True,
    cache: bool = True,
) -> TrainedInspector:
    """Adapt ``source`` to the setting of ``dataset`` using ``fraction`` of its training jobs.

    ``split`` defaults to the seeded random split of ``dataset``; ``options`` to
    :func:`finetune_options`; ``cache`` runs the frozen prefix once per graph (see
    :func:`cache_frozen`) instead of every epoch. The result records ``transfer`` (source
    setting, scheme, fraction, trainable parameters, seconds) and its scores on the target's
    test jobs.
    """
    source.check_compatible(dataset.feature_set, dataset.vocab_digest, what=f"dataset {dataset.root}")
    options = options or finetune_options(source)
    if source.residual and options.target_scaling != "ln":
        raise DripleError("the source inspector predicts residuals over priors: fine-tune it with "
                          f"target_scaling='ln', not {options.target_scaling!r}")
    split = split or random_split(dataset, seed=options.seed)
    part = subsample(split, fraction, seed=options.seed)
    train = [dataset[i] for i in part.train]
    val = [dataset[i] for i in part.val]

    model = copy.deepcopy(source.model)
    model.train()
    reads_graph = getattr(model, "reads_graph", True)
    if not reads_graph and scheme == "paper":
        raise DripleError("a features-only inspector has no graph layers to split: transfer it "
                          "with scheme 'mlp' (all of it is an MLP) or 'scratch'")
    graph_inputs = None
    if source.graph_inputs is not None:  # priors of the target setting: its link rate and host
        host = recorded_host(dataset)
        if host is None:
            _check_same_cpu(dataset, source.graph_inputs.host)
        graph_inputs = source.graph_inputs.for_setting(dataset.setting, host=host)
    if scheme == "scratch":
        names = feature_names_for(dataset.feature_set, train[0].x.size(1))
        feature_scaler = FeatureScaler(names).fit(train)
        torch.manual_seed(options.seed)
        model = build_model(_untuned(model.config()))
        if graph_inputs is not None:
            graph_inputs = GraphInputs(graph_inputs.features, graph_inputs.priors, dataset.setting,
                                       graph_inputs.host).fit(stack_graph_features(train))
    else:
        feature_scaler = source.feature_scaler
    freeze_for_transfer(model, scheme)
    prior = None
    if source.residual:
        prior = graph_inputs.target_priors(stack_graph_features(train), source.target_priors)
    target_scaler = TargetScaler(options.target_scaling).fit(
        stack_targets(train), prior)
    info = {k: v for k, v in source.info.items() if k not in ("scores", "history", "split")}
    info.update(setting=dataset.setting, dataset=str(dataset.root))
    if tuple(dataset.target_names) != source.targets:
        raise DripleError(f"the source inspector predicts {', '.join(source.targets)} but the dataset's "
                          f"targets are {', '.join(dataset.target_names)}")
    predictor = TrainedInspector(model, feature_scaler, target_scaler, info, targets=source.targets,
                                 graph_inputs=graph_inputs, target_priors=source.target_priors)

    start = time.perf_counter()
    train_data, val_data = predictor.prepare(train), predictor.prepare(val)
    networks, histories = members_of(model), []
    for i, network in enumerate(networks):  # an ensemble's members each on their own, as trained
        trained, network_train, network_val = network, train_data, val_data
        if cache and scheme != "scratch" and reads_graph:
            trained, network_train = cache_frozen(network, train_data, scheme)
            _, network_val = cache_frozen(network, val_data, scheme)
        which = f", network {i + 1} of {len(networks)}" if len(networks) > 1 else ""
        histories.append(fit(trained, network_train, network_val, replace(options, seed=options.seed + i),
                             progress, desc=f"fine-tuning ({scheme}{which})"))
    history = joined_history(histories)
    seconds = time.perf_counter() - start
    model.requires_grad_(True)  # a loaded checkpoint is fully trainable; freezing is per run
    predictor.info.update(
        split=part.to_dict(dataset),
        training={**options.to_dict(), "scheme": scheme},
        history=history,
        transfer={"from_setting": source.setting, "scheme": scheme, "fraction": fraction,
                  "n_train": len(part.train), "n_val": len(part.val),
                  "trainable_parameters": _trainable_during(model, scheme), "seconds": seconds},
        scores=score_split(predictor, dataset, part),
    )
    return predictor


def _untuned(config: dict) -> dict:
    """A network's (or an ensemble's) config without the transfer split φr'."""
    if config.get("kind") == "ensemble":
        return {**config, "members": [_untuned(c) for c in config["members"]]}
    return {**config, "tuned_from": None} if "tuned_from" in config else config


def _trainable_during(model: Inspector, scheme: str) -> int:
    probe = copy.deepcopy(model)
    if scheme != "scratch":
        freeze_for_transfer(probe, scheme)
    return trainable_parameters(probe)


def _check_same_cpu(dataset, host) -> None:
    """A target measured on another CPU model than the source's host figures needs figures of
    its own: the priors would divide by the wrong hardware's speed."""
    from driple.setting_datasets import cpu_models

    measured_on = cpu_models(getattr(dataset, "frame", None))
    if host.cpu_model and measured_on and any(m != host.cpu_model for m in measured_on):
        raise DripleError(
            f"the target jobs were measured on {', '.join(measured_on)}, the source's priors use "
            f"figures of {host.cpu_model}: add the target host's `python scripts/bench_host_speed.py "
            "--loopback --json` figures as host_speed to its dataset's provenance.json")
