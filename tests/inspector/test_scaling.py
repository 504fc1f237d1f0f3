import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from driple.errors import DripleError
from driple.inspector.scaling import FeatureScaler, TargetScaler


def _graph(x):
    x = torch.tensor(x, dtype=torch.float)
    return Data(x=x, edge_index=torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.tensor([0.0, math.e - 1]))


def test_feature_scaler_log_and_standardise():
    names = ["tensor_mb", "share_forward"]
    g1, g2 = _graph([[0.0, 0.0], [math.e - 1, 1.0]]), _graph([[math.e ** 2 - 1, 0.5], [math.e - 1, 0.5]])
    scaler = FeatureScaler(names).fit([g1, g2])
    # column 0 after log1p: 0, 1, 2, 1 -> mean 1, std sqrt(0.5); column 1 not logged: mean 0.5
    assert scaler.mean_ == pytest.approx([1.0, 0.5])
    assert scaler.std_ == pytest.approx([math.sqrt(0.5), math.sqrt(0.125)])
    out = scaler.transform(g2)
    assert out.x[:, 0].tolist() == pytest.approx([1 / math.sqrt(0.5), 0.0], abs=1e-6)
    assert out.edge_weight.tolist() == pytest.approx([0.0, 1.0])
    assert g2.x[0, 0] == pytest.approx(math.e ** 2 - 1)  # the input is not modified
    again = FeatureScaler.from_dict(scaler.to_dict())
    assert torch.equal(again.transform(g1).x, scaler.transform(g1).x)
    with pytest.raises(DripleError, match="features per group"):
        scaler.transform(_graph([[1.0, 2.0, 3.0]]))


@pytest.mark.parametrize("method", ["max", "standard", "log"])
def test_target_scaler_round_trip(method):
    y = np.array([[1.0, 200.0, np.nan], [3.0, 100.0, np.nan], [2.0, 0.0, np.nan]])
    scaler = TargetScaler(method).fit(y)
    z = scaler.transform(y)
    assert np.isnan(z[:, 2]).all()
    assert np.allclose(scaler.inverse_transform(z)[:, :2], y[:, :2])
    again = TargetScaler.from_dict(scaler.to_dict())
    assert np.allclose(again.transform(y)[:, :2], z[:, :2])


def test_target_scaler_max_is_paper_scaling():
    scaler = TargetScaler("max").fit(np.array([[1.0, 0.0], [4.0, 0.0]]))
    assert scaler.scale_ == [4.0, 1.0]  # an all-zero column keeps scale 1
    assert scaler.transform([[2.0, 0.0]]).tolist() == [[0.5, 0.0]]
    with pytest.raises(DripleError):
        TargetScaler("minmax")


def test_feature_scaler_graph_attr():
    g1, g2 = _graph([[0.0, 0.0]]), _graph([[1.0, 1.0]])
    g1.graph_attr = torch.tensor([[0.0, math.e - 1]], dtype=torch.float64)
    g2.graph_attr = torch.tensor([[math.e ** 2 - 1, math.e - 1]], dtype=torch.float64)
    scaler = FeatureScaler(["tensor_mb", "share_comm"]).fit([g1, g2])
    assert scaler.graph_mean_ == pytest.approx([1.0, 1.0]) and scaler.graph_std_ == pytest.approx([1.0, 1.0])
    assert scaler.transform(g2).graph_attr[0].tolist() == pytest.approx([1.0, 0.0])
    assert FeatureScaler.from_dict(scaler.to_dict()).graph_mean_ == scaler.graph_mean_
    bare = FeatureScaler(["tensor_mb", "share_comm"]).fit([_graph([[0.0, 0.0]])])
    assert bare.graph_mean_ is None and "graph_attr" not in bare.transform(g1)  # raw values never leak
