"""A tiny shipped-inspector registry built from real graphs of tiny models (random weights).

The inspector's numbers mean nothing here; what is tested is the path from a model to a
profile: registry, checksum, graph building with the inspector's options, intervals, CLI.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from predict_helpers import tiny_mlp

SETTING = "cpu-ddp-w2-lo"
BUILDER = {"groups": 8, "grouping": "uniform", "features": "driple"}


@pytest.fixture(scope="session")
def models_root(tmp_path_factory):
    from driple.graph.build import build_input
    from driple.inspector.model import Inspector
    from driple.inspector.predictor import TrainedInspector
    from driple.inspector.scaling import FeatureScaler, TargetScaler
    from driple.inspector.train import feature_names_for
    from driple.predict.intervals import ConformalIntervals
    from driple.predict.shipping import ship

    torch.manual_seed(0)
    graphs = [build_input(tiny_mlp(h), torch.randn(4, 8), strategy=SETTING, **BUILDER)
              for h in (8, 16, 32)]
    names = feature_names_for("driple", graphs[0].x.size(1))
    rng = np.random.default_rng(0)
    y = rng.uniform(1, 10, size=(3, 12))
    inspector = TrainedInspector(
        Inspector(len(names), hidden_channels=8, num_repeats=2), FeatureScaler(names).fit(graphs),
        TargetScaler("max").fit(y),
        {"feature_set": graphs[0].feature_set, "vocab_digest": graphs[0].vocab_digest,
         "builder": BUILDER, "setting": SETTING, "dataset": "tests"})
    pred = np.vstack([np.clip(inspector.predict(graphs), 0, None)] * 4)
    meas = pred * rng.uniform(0.5, 2.0, size=pred.shape)
    inspector.info["intervals"] = ConformalIntervals(0.9).fit(meas, pred).to_dict()
    root = tmp_path_factory.mktemp("trained_models")
    ship(inspector, SETTING, description="test inspector", trained="random weights (test)",
         command="pytest", root=root)
    return root


@pytest.fixture
def registry(models_root, monkeypatch):
    monkeypatch.setenv("DRIPLE_MODELS", str(models_root))
    return models_root
