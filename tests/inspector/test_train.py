import pytest
import torch

from driple.inspector.model import Inspector
from driple.inspector.checkpoint import TrainedInspector
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.inspector.train import TrainOptions, fit, masked_mse


def test_masked_mse_ignores_nan():
    pred = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    target = torch.tensor([[2.0, float("nan")], [3.0, 6.0]])
    assert masked_mse(pred, target).item() == pytest.approx((1 + 0 + 4) / 3)


@pytest.fixture
def prepared(synthetic_targets, tiny_graph):
    """Function ``(n=12) -> (untrained TrainedInspector, n graphs with synthetic targets)``."""
    return lambda n=12: _prepared(tiny_graph, synthetic_targets, n)


def _prepared(tiny_graph, synthetic_targets, n):
    graphs = []
    for i in range(n):
        g = tiny_graph(4 + i % 7, seed=i)
        g.y = synthetic_targets(g)
        graphs.append(g)
    names = ["op_freq", "tensor_mb", "n_ops"]
    fs = FeatureScaler(names).fit(graphs)
    ts = TargetScaler("standard").fit(torch.cat([g.y for g in graphs]).double().numpy())
    return TrainedInspector(Inspector(3, hidden_channels=32, num_repeats=3), fs, ts), graphs


def test_overfits_tiny_dataset(prepared):
    torch.manual_seed(0)
    predictor, graphs = prepared()
    data = predictor.prepare(graphs)
    history = fit(predictor.model, data, data,
                  TrainOptions(epochs=100, patience=100, batch_size=12, lr=1e-2), progress=False)
    first, best = history["train_loss"][0], min(history["train_loss"])
    assert best < first / 10, (first, best)
    assert history["best_val_loss"] < first / 10
    assert history["epochs"] == 100


def test_fit_early_stops_and_restores_best(prepared):
    torch.manual_seed(0)
    predictor, graphs = prepared(8)
    data = predictor.prepare(graphs)
    history = fit(predictor.model, data[:6], data[6:], TrainOptions(epochs=200, patience=3, lr=0.05),
                  progress=False)
    assert history["epochs"] == history["best_epoch"] + 4 or history["epochs"] == 200
    from driple.inspector.train import _loss_on
    from torch_geometric.loader import DataLoader

    val = _loss_on(predictor.model, DataLoader(data[6:], batch_size=8))
    assert abs(val - history["best_val_loss"]) < 1e-5


class _PygPath(torch.nn.Module):
    """The same Inspector fed PyG mini-batches: fit's generic path (DataLoader + forward)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)


def test_fast_batches_match_dataloader_path(prepared):
    """GraphBatch training (Inspector) and PyG DataLoader training (any module) compute the
    same losses: one batch per epoch, so the shuffling cannot differ."""
    import copy

    torch.manual_seed(0)
    predictor, graphs = prepared(10)
    data = predictor.prepare(graphs)
    options = TrainOptions(epochs=4, patience=4, batch_size=8, lr=1e-2)
    pyg_model = _PygPath(copy.deepcopy(predictor.model))
    fast = fit(predictor.model, data[:7], data[7:], options, progress=False)
    pyg = fit(pyg_model, data[:7], data[7:], options, progress=False)
    assert fast["train_loss"] == pytest.approx(pyg["train_loss"], rel=1e-4)
    assert fast["val_loss"] == pytest.approx(pyg["val_loss"], rel=1e-4)
