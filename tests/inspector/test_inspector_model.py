import copy

import torch
from torch_geometric.data import Batch

from driple.inspector.model import Inspector
from inspector_helpers import tiny_graph


def _run(model, data):
    return model(data.x, data.edge_index, data.edge_weight, getattr(data, "batch", None),
                 getattr(data, "num_graphs", None))


def test_inspector_output_shape():
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=16, num_repeats=4)
    assert str(model) == "Inspector(3, 12, hidden_channels=16, num_repeats=4)"
    data = tiny_graph(4)
    assert _run(model, data).size() == (1, 12)

    batch = Batch.from_data_list([tiny_graph(n, seed=n) for n in (4, 7, 10)])
    assert _run(model, batch).size() == (3, 12)


def test_inspector_batch_equals_single_graphs():
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=16, num_repeats=4).eval()
    graphs = [tiny_graph(n, seed=n) for n in (4, 7, 10)]
    batched = _run(model, Batch.from_data_list(graphs))
    single = torch.cat([_run(model, g) for g in graphs])
    assert torch.allclose(batched, single, atol=1e-5)


def test_inspector_node_order_invariance():
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=16, num_repeats=6).eval()
    data = tiny_graph(8, seed=3)
    perm = torch.randperm(8)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(8)  # old node i is new node inv[i]
    edge_perm = torch.randperm(data.edge_index.size(1))
    out1 = model(data.x, data.edge_index, data.edge_weight)
    out2 = model(data.x[perm], inv[data.edge_index][:, edge_perm], data.edge_weight[edge_perm])
    assert torch.allclose(out1, out2, atol=1e-5)


def test_inspector_edge_weight_matters():
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=8, num_repeats=2).eval()
    data = tiny_graph(6)
    assert not torch.allclose(model(data.x, data.edge_index, data.edge_weight),
                              model(data.x, data.edge_index, 10 * data.edge_weight))


def test_inspector_reset_parameters_and_config():
    model = Inspector(3, hidden_channels=8, num_repeats=2, dropout=0.1)
    before = copy.deepcopy(model.state_dict())
    model.reset_parameters()
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    clone = Inspector(**model.config())
    assert clone.config() == model.config()
    assert clone.state_dict().keys() == model.state_dict().keys()


def test_inspector_split_repeats():
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=8, num_repeats=6).eval()
    data = tiny_graph(5)
    before = model(data.x, data.edge_index, data.edge_weight)
    model.split_repeats()
    assert model.tuned_from == 3
    assert "tuned_from=3" in str(model)
    # the copy starts equal to φr: same prediction
    assert torch.allclose(before, model(data.x, data.edge_index, data.edge_weight))
    # changing φr' changes only the later repetitions' layer
    with torch.no_grad():
        model.conv_repeat_tuned.bias.add_(1.0)
    assert not torch.allclose(before, model(data.x, data.edge_index, data.edge_weight))
    assert Inspector(**model.config()).state_dict().keys() == model.state_dict().keys()


def test_inspector_rejects_wrong_width():
    model = Inspector(3, hidden_channels=8, num_repeats=1)
    data = tiny_graph(5, num_features=10)
    try:
        model(data.x, data.edge_index, data.edge_weight)
    except ValueError as exc:
        assert "[num_groups, 3]" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_inspector_graph_channels():
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=8, num_repeats=2, graph_channels=6).eval()
    assert "graph_channels=6" in str(model)
    graphs = [tiny_graph(n, seed=n) for n in (4, 6)]
    batch = Batch.from_data_list(graphs)
    attrs = torch.rand(2, 6)
    out = model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, 2, graph_attr=attrs)
    assert out.size() == (2, 12)
    other = model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, 2, graph_attr=attrs + 1)
    assert not torch.allclose(out, other)
    try:
        model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, 2)
    except ValueError as exc:
        assert "graph_attr" in str(exc)
    else:
        raise AssertionError("expected ValueError")
