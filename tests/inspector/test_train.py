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


def test_ema_keeps_the_average_of_the_weights(prepared):
    """``ema``: what is validated and kept is the moving average of the weights after each step.
    One batch per epoch and two epochs: the candidates are the weights after step 1 (the first
    average is a copy) and 0.9 x those + 0.1 x the weights after step 2; the kept one is the
    candidate with the lower validation loss, and the history's best loss is its loss."""
    import copy

    from driple.inspector.model import GraphBatch, run_batch
    from driple.inspector.train import _loss_on

    torch.manual_seed(0)
    predictor, graphs = prepared(10)
    data = predictor.prepare(graphs)
    train, val = data[:8], data[8:]
    start = copy.deepcopy(predictor.model)

    # the same two Adam steps by hand (one batch of all 8 jobs; order does not change the mean)
    by_hand = copy.deepcopy(start)
    opt = torch.optim.Adam(by_hand.parameters(), lr=1e-2, weight_decay=1e-6)
    batch = GraphBatch.from_graphs(train)
    steps = []
    for _ in range(2):
        opt.zero_grad()
        masked_mse(run_batch(by_hand, batch), batch.y).backward()
        opt.step()
        steps.append({k: v.detach().clone() for k, v in by_hand.state_dict().items()})
    averaged = {k: 0.9 * steps[0][k] + 0.1 * steps[1][k] for k in steps[0]}
    val_batch = [GraphBatch.from_graphs(val)]
    losses = []
    for state in (steps[0], averaged):
        by_hand.load_state_dict(state)
        losses.append(_loss_on(by_hand, val_batch))
    expected = (steps[0], averaged)[int(losses[1] < losses[0])]

    history = fit(predictor.model, train, val,
                  TrainOptions(epochs=2, patience=10, batch_size=8, lr=1e-2, ema=0.9), progress=False)
    kept = predictor.model.state_dict()
    for k, v in expected.items():
        assert torch.allclose(kept[k], v, atol=1e-5), k
    assert history["best_val_loss"] == pytest.approx(min(losses), rel=1e-4)
    assert history["val_loss"] == pytest.approx(losses, rel=1e-4)


def test_ema_out_of_range_is_a_clear_error(prepared):
    from driple.errors import DripleError

    predictor, graphs = prepared(4)
    data = predictor.prepare(graphs)
    with pytest.raises(DripleError, match="ema must be in"):
        fit(predictor.model, data, data, TrainOptions(epochs=1, ema=1.0), progress=False)
