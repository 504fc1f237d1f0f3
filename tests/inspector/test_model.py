import copy

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from driple.inspector.model import (GraphBatch, Inspector, Propagation, _RepeatedConvGRU,
                                    reference_forward, run_batch)
from driple.metrics import target_names

N_TARGETS = len(target_names())  # the declared targets (labels v2: the 12 metrics and the step time)


def _run(model, data):
    return model(data.x, data.edge_index, data.edge_weight, getattr(data, "batch", None),
                 getattr(data, "num_graphs", None))


def test_inspector_output_shape(tiny_graph):
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=16, num_repeats=4)
    assert str(model) == f"Inspector(3, {N_TARGETS}, hidden_channels=16, num_repeats=4)"
    data = tiny_graph(4)
    assert _run(model, data).size() == (1, N_TARGETS)

    batch = Batch.from_data_list([tiny_graph(n, seed=n) for n in (4, 7, 10)])
    assert _run(model, batch).size() == (3, N_TARGETS)


def test_inspector_batch_equals_single_graphs(tiny_graph):
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=16, num_repeats=4).eval()
    graphs = [tiny_graph(n, seed=n) for n in (4, 7, 10)]
    batched = _run(model, Batch.from_data_list(graphs))
    single = torch.cat([_run(model, g) for g in graphs])
    assert torch.allclose(batched, single, atol=1e-5)


def test_inspector_node_order_invariance(tiny_graph):
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


def test_inspector_edge_weight_matters(tiny_graph):
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


def test_inspector_split_repeats(tiny_graph):
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


def test_inspector_rejects_wrong_width(tiny_graph):
    model = Inspector(3, hidden_channels=8, num_repeats=1)
    data = tiny_graph(5, num_features=10)
    try:
        model(data.x, data.edge_index, data.edge_weight)
    except ValueError as exc:
        assert "[num_groups, 3]" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_inspector_graph_channels(tiny_graph):
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=8, num_repeats=2, graph_channels=6).eval()
    assert "graph_channels=6" in str(model)
    graphs = [tiny_graph(n, seed=n) for n in (4, 6)]
    batch = Batch.from_data_list(graphs)
    attrs = torch.rand(2, 6)
    out = model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, 2, graph_attr=attrs)
    assert out.size() == (2, N_TARGETS)
    other = model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, 2, graph_attr=attrs + 1)
    assert not torch.allclose(out, other)
    try:
        model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, 2)
    except ValueError as exc:
        assert "graph_attr" in str(exc)
    else:
        raise AssertionError("expected ValueError")


# ---------------------------------------------------------------- the fused path vs the modules
def _directed_graph(n=7, seed=0):
    """Edges one way only, a self-loop and a duplicate edge: Â is not symmetric."""
    g = torch.Generator().manual_seed(seed)
    src = torch.tensor([0, 1, 2, 3, 4, 5, 2, 3, 3])
    dst = torch.tensor([1, 2, 3, 4, 5, 6, 0, 3, 4])
    return Data(x=torch.rand(n, 3, generator=g), edge_index=torch.stack([src, dst]),
                edge_weight=torch.rand(src.numel(), generator=g) + 0.5, num_nodes=n)


def _case_graphs(tiny_graph):
    return {
        "same size": [tiny_graph(12, seed=seed) for seed in range(3)],  # dense Set2Set
        "mixed sizes": [tiny_graph(n, seed=n) for n in (4, 7, 10)],  # padded Set2Set
        "directed": [_directed_graph(7, seed) for seed in range(2)],  # Â^T != Â
    }


@pytest.mark.parametrize("tuned", [None, 2])
@pytest.mark.parametrize("case", ["same size", "mixed sizes", "directed"])
def test_fused_matches_modules(case, tuned, tiny_graph):
    """Forward and every parameter gradient equal those of GCNConv + GRUCell + Set2Set run
    layer by layer (float64, so the comparison is tight)."""
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=8, num_repeats=5, tuned_from=tuned).double()
    if tuned is not None:
        with torch.no_grad():
            model.conv_repeat_tuned.lin.weight.mul_(1.5)
            model.conv_repeat_tuned.bias.add_(0.1)
    graphs = [g.clone() for g in _case_graphs(tiny_graph)[case]]
    for g in graphs:
        g.x, g.edge_weight = g.x.double(), g.edge_weight.double()
    batch = Batch.from_data_list(graphs)
    args = (batch.x, batch.edge_index, batch.edge_weight, batch.batch, batch.num_graphs)

    def grads(run):
        model.zero_grad()
        out = run()
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        return out.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}

    ref, ref_grads = grads(lambda: reference_forward(model, *args))
    for run in (lambda: model(*args), lambda: model.forward_batch(GraphBatch.from_graphs(graphs))):
        out, out_grads = grads(run)
        assert torch.allclose(out, ref, rtol=1e-9, atol=1e-12)
        for k, g in ref_grads.items():
            assert torch.allclose(out_grads[k], g, rtol=1e-8, atol=1e-12), k
    with torch.inference_mode():  # the buffer-reusing inference path
        assert torch.allclose(model(*args), ref, rtol=1e-9, atol=1e-12)


def test_padded_set2set_matches_the_scatter_one_and_declines_what_it_cannot_pad():
    """Graphs of 1, 5 and 3 groups: the padded, masked Set2Set gives PyG's scatter result and
    gradient; an unsorted batch or a graph without groups is left to the scatter path."""
    from torch_geometric.nn.aggr import Set2Set

    from driple.inspector.model import _set2set_padded

    torch.manual_seed(0)
    s2s = Set2Set(4, processing_steps=3).double()
    batch = torch.tensor([0, 1, 1, 1, 1, 1, 2, 2, 2])
    h = torch.randn(9, 4, dtype=torch.double, requires_grad=True)
    ref = s2s(h, batch, dim_size=3)
    (g_ref,) = torch.autograd.grad(ref.sum(), h)
    out = _set2set_padded(s2s, h, batch, 3)
    (g_out,) = torch.autograd.grad(out.sum(), h)
    assert torch.allclose(out, ref, rtol=1e-10, atol=1e-12) and torch.allclose(g_out, g_ref, rtol=1e-9, atol=1e-12)
    assert _set2set_padded(s2s, h, batch.flip(0), 3) is None  # not sorted
    assert _set2set_padded(s2s, h, batch, 4) is None  # graph 3 has no group


def test_repeated_conv_gru_gradcheck():
    torch.manual_seed(0)
    gru = torch.nn.GRUCell(4, 4).double()
    data = _directed_graph(7)
    adj = Propagation.from_edges(data.edge_index, data.edge_weight.double(), 7, torch.double)
    h = torch.randn(7, 4, dtype=torch.double, requires_grad=True)
    w_r = torch.randn(4, 4, dtype=torch.double, requires_grad=True)
    b_r = torch.randn(4, dtype=torch.double, requires_grad=True)
    weights = [p.detach().clone().requires_grad_(True) for p in
               (gru.weight_ih, gru.bias_ih, gru.weight_hh, gru.bias_hh)]

    def run(h, w_r, b_r, w_ih, b_ih, w_hh, b_hh):
        return _RepeatedConvGRU.apply(h, w_r, b_r, w_ih, b_ih, w_hh, b_hh, adj, 3)

    assert torch.autograd.gradcheck(run, (h, w_r, b_r, *weights))


def test_fused_frozen_inputs_and_reused_buffers(tiny_graph):
    """Only what requires grad gets one; overlapping graphs (two live forwards, buffers taken
    from the pool) and a retained graph give the same gradients as one forward at a time."""
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=8, num_repeats=4)
    graphs = [tiny_graph(6, seed=s) for s in range(3)]
    gb = GraphBatch.from_graphs(graphs)
    model.conv_repeat.requires_grad_(False)
    model.forward_batch(gb).sum().backward()
    assert model.conv_repeat.lin.weight.grad is None and model.gru.weight_ih.grad is not None
    single = model.gru.weight_ih.grad.clone()
    model.zero_grad()
    out1, out2 = model.forward_batch(gb), model.forward_batch(gb)
    (out1.sum() + out2.sum()).backward(retain_graph=True)
    assert torch.allclose(model.gru.weight_ih.grad, 2 * single, atol=1e-6)
    out1.sum().backward()
    assert torch.allclose(model.gru.weight_ih.grad, 3 * single, atol=1e-6)
    del out1, out2  # their workspaces return to the pool: the next, smaller batch reuses one
    small = GraphBatch.from_graphs(graphs[:2])
    model.zero_grad()
    model.forward_batch(small).sum().backward()
    fused = model.gru.weight_ih.grad.clone()
    pyg = Batch.from_data_list(graphs[:2])
    model.zero_grad()
    reference_forward(model, pyg.x, pyg.edge_index, pyg.edge_weight, pyg.batch, 2).sum().backward()
    assert torch.allclose(fused, model.gru.weight_ih.grad, atol=1e-6)


def test_batch_paths_and_predict_agree(tiny_graph):
    """PyG batch, GraphBatch of raw graphs, of prepared graphs and TrainedInspector.predict
    (which stacks raw graphs itself) give the same predictions."""
    from driple.inspector.checkpoint import TrainedInspector
    from driple.inspector.scaling import FeatureScaler, TargetScaler

    torch.manual_seed(0)
    graphs = [tiny_graph(n, seed=n) for n in (4, 7, 7, 10)]
    predictor = TrainedInspector(Inspector(3, hidden_channels=8, num_repeats=3, graph_channels=6),
                                 FeatureScaler(["op_freq", "tensor_mb", "n_ops"]).fit(graphs),
                                 TargetScaler().fit(torch.rand(4, N_TARGETS).numpy()))
    prepared = predictor.prepare(graphs)
    model = predictor.model.eval()
    pyg = run_batch(model, Batch.from_data_list(prepared)).detach()
    raw = [Data(x=p.x, edge_index=p.edge_index, edge_weight=p.edge_weight,
                graph_attr=p.graph_attr) for p in prepared]
    assert torch.allclose(run_batch(model, GraphBatch.from_graphs(raw)), pyg, atol=1e-6)
    assert torch.allclose(run_batch(model, GraphBatch.from_graphs(prepared)), pyg, atol=1e-6)
    scaled = predictor.predict_scaled(prepared, batch_size=3)
    assert np.allclose(scaled, pyg.double().numpy(), atol=1e-6)
    assert np.allclose(predictor.predict(graphs, batch_size=3),
                       predictor.target_scaler.inverse_transform(scaled), rtol=1e-5)
