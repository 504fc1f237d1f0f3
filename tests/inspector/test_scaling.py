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


E = math.e


@pytest.mark.parametrize("method,y,center,scale,raw,scaled,back_z,back_y", [
    # max: divide by the column's max |y| (4, 8); no centring
    ("max", [[1.0, -8.0], [4.0, 2.0]], [0.0, 0.0], [4.0, 8.0],
     [[2.0, -4.0]], [[0.5, -0.5]], [[0.25, 1.5]], [[1.0, 12.0]]),
    # standard: mean (2, 20), population std (1, 10)
    ("standard", [[1.0, 10.0], [3.0, 30.0]], [2.0, 20.0], [1.0, 10.0],
     [[4.0, 5.0]], [[2.0, -1.5]], [[-1.0, 0.5]], [[1.0, 25.0]]),
    # log: log1p(y) is (1, 0), (3, 2) -> mean (2, 1), std (1, 1); inverse is expm1
    ("log", [[E - 1, 0.0], [E ** 3 - 1, E ** 2 - 1]], [2.0, 1.0], [1.0, 1.0],
     [[E ** 2 - 1, E ** 4 - 1]], [[0.0, 3.0]], [[1.0, -1.0]], [[E ** 3 - 1, 0.0]]),
])
def test_target_scaler_by_hand(method, y, center, scale, raw, scaled, back_z, back_y):
    scaler = TargetScaler(method).fit(np.array(y))
    assert scaler.center_ == pytest.approx(center) and scaler.scale_ == pytest.approx(scale)
    assert scaler.low_ == pytest.approx(np.min(y, axis=0)) and scaler.high_ == pytest.approx(np.max(y, axis=0))
    assert scaler.transform(raw).tolist() == [pytest.approx(row) for row in scaled]
    assert scaler.inverse_transform(back_z).tolist() == [pytest.approx(row) for row in back_y]


def test_target_scaler_log_clips_negative_targets_to_zero():
    scaler = TargetScaler("log").fit(np.array([[E - 1], [E ** 3 - 1]]))  # log1p: 1, 3 -> mean 2, std 1
    assert scaler.transform([[-5.0]]).tolist() == [[-2.0]]  # as log1p(0) = 0


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
