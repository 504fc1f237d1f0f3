"""The inspector: a graph network that predicts a job's targets (:mod:`driple.metrics`) from its graph.

Data flow: :mod:`dataset` (collector's results.csv + grouped graphs) -> :mod:`splits`
(train / val / calibration / test by architecture, see :mod:`jobs`) -> :mod:`scaling` and
:mod:`graph_inputs` (graph-level features and physical priors) -> :mod:`model` (GCN + repeated
GCN/GRU + Set2Set + MLP; the hybrid; features only) trained by :mod:`train` -> :mod:`checkpoint`
(model + scalers + graph inputs + target names: load, save, predict graphs; optionally a
:mod:`trees` member fitted by :mod:`ensemble`, averaged in) and :mod:`transfer` (fine-tuning to
another setting). :mod:`evaluate` fits every :mod:`estimators` (graph models,
:mod:`baselines`, the :mod:`analytic` step time; by name: :mod:`estimator_registry`) on the
same folds and scores them (:mod:`scores`) beside each label's :mod:`noise` floor.

Importing this package is cheap; torch is imported when a name below is first used.
"""
from __future__ import annotations

from driple._lazy import lazy_attributes

_LAZY = {
    "Inspector": "driple.inspector.model",
    "FeatureMLP": "driple.inspector.model",
    "GraphInputs": "driple.inspector.graph_inputs",
    "InspectorConfig": "driple.inspector.train",
    "preset": "driple.inspector.train",
    "select_inspector": "driple.inspector.train",
    "AnalyticStepTime": "driple.inspector.analytic",
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
