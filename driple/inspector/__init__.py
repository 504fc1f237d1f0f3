"""The inspector: a graph network that predicts a job's targets (:mod:`driple.metrics`) from its graph.

Data flow: :mod:`dataset` (collector's results.csv + grouped graphs) -> :mod:`splits` ->
:mod:`scaling` -> :mod:`model` (GCN + repeated GCN/GRU + Set2Set + MLP) trained by
:mod:`train` -> :mod:`checkpoint` (model + scalers + target names: load, save, predict
graphs) -> :mod:`evaluate` (next to :mod:`baselines`, with :mod:`scores`) and :mod:`transfer`
(fine-tuning to another setting).

Importing this package is cheap; torch is imported when a name below is first used.
"""
from __future__ import annotations

from driple._lazy import lazy_attributes

_LAZY = {
    "Inspector": "driple.inspector.model",
    "InspectorDataset": "driple.inspector.dataset",
    "FeatureScaler": "driple.inspector.scaling",
    "TargetScaler": "driple.inspector.scaling",
    "Split": "driple.inspector.splits",
    "random_split": "driple.inspector.splits",
    "family_splits": "driple.inspector.splits",
    "TrainOptions": "driple.inspector.train",
    "train_inspector": "driple.inspector.train",
    "TrainedInspector": "driple.inspector.checkpoint",
    "load_inspector": "driple.inspector.checkpoint",
    "finetune": "driple.inspector.transfer",
    "freeze_for_transfer": "driple.inspector.transfer",
    "nrmse": "driple.inspector.scores",
    "mape": "driple.inspector.scores",
}


__getattr__, __all__ = lazy_attributes(__name__, _LAZY)
