"""Training an inspector: MSE on scaled targets, Adam, early stopping on the validation loss.

:func:`train_inspector` is the one call: dataset + split in, a :class:`TrainedInspector` (model,
scalers, record of the run, test scores) out. :func:`fit` is the bare loop, reused by
fine-tuning.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from driple.errors import DripleError
from driple.inspector.model import (GraphBatch, Inspector, flush_denormals, release_workspaces,
                                    run_batch)
from driple.inspector.checkpoint import TrainedInspector
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.inspector.scores import score_table
from driple.inspector.splits import Split


@dataclass
class TrainOptions:
    """Optimisation settings (the paper's: Adam, lr 3e-3, weight decay 1e-6).

    ``epochs`` is the upper bound; training stops after ``patience`` epochs without a better
    validation loss and keeps the best weights. ``target_scaling``: see :class:`TargetScaler`.
    """

    lr: float = 3e-3
    weight_decay: float = 1e-6
    epochs: int = 300
    patience: int = 30
    batch_size: int = 32
    target_scaling: str = "max"
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def masked_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the target entries that are not NaN."""
    mask = torch.isfinite(target)
    diff = torch.where(mask, pred - torch.nan_to_num(target), torch.zeros_like(pred))
    return diff.pow(2).sum() / mask.sum().clamp_min(1)


def _loss_on(model: torch.nn.Module, batches) -> float:
    """Masked MSE per finite target over ``batches`` (:class:`GraphBatch` or PyG batches)."""
    model.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for batch in batches:
            pred = run_batch(model, batch)
            n = int(torch.isfinite(batch.y).sum())
            total += float(masked_mse(pred, batch.y)) * n
            count += n
    return total / max(count, 1)


def _batches(graphs: Sequence, batch_size: int, order=None) -> list:
    """Batches (:class:`GraphBatch`) of ``batch_size`` graphs, in ``order`` if given."""
    order = range(len(graphs)) if order is None else order
    return [GraphBatch.from_graphs([graphs[i] for i in order[j:j + batch_size]])
            for j in range(0, len(order), batch_size)]


def fit(model: torch.nn.Module, train: Sequence, val: Sequence,
        options: TrainOptions = TrainOptions(), progress: bool = True, desc: str = "training") -> dict:
    """Train ``model`` in place on prepared (scaled) graphs; returns the history.

    Only parameters with ``requires_grad`` are optimised (fine-tuning freezes the rest). The
    weights of the epoch with the lowest validation loss are restored at the end. History:
    ``train_loss``, ``val_loss`` (per epoch), ``best_epoch``, ``best_val_loss``, ``seconds``.

    An :class:`Inspector` gets its batches as :class:`GraphBatch` (no PyG collation; the
    validation batches are stacked once); other modules (the cached tails of fine-tuning) get
    PyG mini-batches; either way the shuffling is seeded by ``options.seed``. Denormal floats
    are flushed to zero during the epochs (:func:`flush_denormals`).
    """
    from tqdm.auto import tqdm

    if not train:
        raise DripleError("no training jobs: the split left the training set empty")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise DripleError("nothing to train: every parameter of the model is frozen")
    torch.manual_seed(options.seed)
    generator = torch.Generator().manual_seed(options.seed)
    train, val = list(train), list(val or train)
    val_size = max(options.batch_size, 64)
    if isinstance(model, Inspector):
        def epoch_batches():
            return _batches(train, options.batch_size,
                            torch.randperm(len(train), generator=generator).tolist())
        val_batches = _batches(val, val_size)
    else:
        from torch_geometric.loader import DataLoader

        train_loader = DataLoader(train, batch_size=options.batch_size, shuffle=True,
                                  generator=generator)
        val_batches = DataLoader(val, batch_size=val_size)

        def epoch_batches():
            return train_loader
    optimizer = torch.optim.Adam(params, lr=options.lr, weight_decay=options.weight_decay)

    history = {"train_loss": [], "val_loss": [], "best_epoch": 0, "best_val_loss": float("inf")}
    best_state = copy.deepcopy(model.state_dict())
    start = time.perf_counter()
    bar = tqdm(range(options.epochs), desc=desc, unit="epoch", disable=not progress, leave=False)
    for epoch in bar:
        model.train()
        total, count = 0.0, 0
        with flush_denormals():
            for batch in epoch_batches():
                optimizer.zero_grad()
                pred = run_batch(model, batch)
                loss = masked_mse(pred, batch.y)
                loss.backward()
                optimizer.step()
                total += loss.item() * batch.num_graphs
                count += batch.num_graphs
            val_loss = _loss_on(model, val_batches)
        history["train_loss"].append(total / max(count, 1))
        history["val_loss"].append(val_loss)
        if val_loss < history["best_val_loss"]:
            history["best_val_loss"], history["best_epoch"] = val_loss, epoch
            best_state = copy.deepcopy(model.state_dict())
        bar.set_postfix(train=f"{total / max(count, 1):.4f}", val=f"{val_loss:.4f}",
                        best=history["best_epoch"], refresh=False)
        if epoch - history["best_epoch"] >= options.patience:
            break
    model.load_state_dict(best_state)
    model.eval()
    release_workspaces()
    history["epochs"] = len(history["train_loss"])
    history["seconds"] = time.perf_counter() - start
    return history


def feature_names_for(feature_set: Optional[str], num_features: int) -> list[str]:
    """Column names of ``x`` for a feature set (generic ``f0, f1, ...`` if unknown)."""
    try:
        from driple.graph.features import FEATURE_SETS

        names = FEATURE_SETS.get(feature_set or "")
    except ImportError:  # pragma: no cover - the graph builder is part of driple
        names = None
    if names is None or len(names) != num_features:
        return [f"f{i}" for i in range(num_features)]
    return list(names)


def _dataset_info(dataset) -> dict:
    return {
        "feature_set": dataset.feature_set,
        "vocab_digest": dataset.vocab_digest,
        "builder": dict(getattr(dataset, "options", {})),
        "setting": getattr(dataset, "setting", None),
        "dataset": str(getattr(dataset, "root", "")),
    }


def train_inspector(
    dataset,
    split: Split,
    hidden_channels: int = 64,
    num_repeats: int = 50,
    set2set_steps: int = 3,
    dropout: float = 0.0,
    graph_attr: bool = False,
    options: TrainOptions = TrainOptions(),
    progress: bool = True,
) -> TrainedInspector:
    """Fit scalers and an :class:`Inspector` on ``split.train`` (early stopping on
    ``split.val``) and score it on ``split.test``. ``graph_attr=True`` also feeds the scaled
    graph-level attributes to the MLP head (not in the paper; see :class:`Inspector`).

    The returned predictor's ``info`` records the dataset's feature set, op vocabulary,
    builder options and setting, the split (job ids), the options, the history and
    ``scores`` (``{"val": table, "test": table}``, see :func:`score_table`).
    """
    train = [dataset[i] for i in split.train]
    val = [dataset[i] for i in split.val]
    if not train:
        raise DripleError("the split has no training jobs")
    names = feature_names_for(dataset.feature_set, train[0].x.size(1))
    feature_scaler = FeatureScaler(names).fit(train)
    target_scaler = TargetScaler(options.target_scaling).fit(
        np.concatenate([g.y.view(1, -1).double().numpy() for g in train]))
    torch.manual_seed(options.seed)
    graph_channels = train[0].graph_attr.numel() if graph_attr else 0
    model = Inspector(len(names), hidden_channels=hidden_channels, num_repeats=num_repeats,
                      out_channels=len(dataset.target_names), set2set_steps=set2set_steps,
                      dropout=dropout, graph_channels=graph_channels)
    predictor = TrainedInspector(model, feature_scaler, target_scaler, _dataset_info(dataset),
                                 targets=dataset.target_names)
    history = fit(model, predictor.prepare(train), predictor.prepare(val), options, progress)
    predictor.info.update(
        split=split.to_dict(dataset),
        training={**options.to_dict(), "scheme": "scratch"},
        history=history,
        scores=score_split(predictor, dataset, split),
    )
    return predictor


def score_split(predictor: TrainedInspector, dataset, split: Split) -> dict:
    """Score tables of ``predictor`` on the validation and test jobs of ``split``."""
    scores = {}
    for part in ("val", "test"):
        idx = getattr(split, part)
        if idx:
            graphs = [dataset[i] for i in idx]
            measured = np.concatenate([g.y.view(1, -1).double().numpy() for g in graphs])
            scores[part] = score_table(measured, predictor.predict(graphs))
    return scores
