"""The input builder end to end: a training step in, the grouped torch_geometric Data out."""
import pytest
import torch

from driple.graph.build import GRAPH_ATTRS, build_input, op_graph_for
from driple.graph.features import FEATURE_SETS, OpVocabulary


def test_build_input_data(mlp_step):
    model, batch, loss, opt = mlp_step
    graph, *_ = op_graph_for(model, batch, loss, opt)
    vocab = OpVocabulary.from_graphs([graph])
    data = build_input(model, batch, loss_fn=loss, optimizer=opt, groups=5, vocabulary=vocab, features="rich")
    assert data.x.shape == (5, len(FEATURE_SETS["rich"]))
    assert data.graph_attr.shape == (1, len(GRAPH_ATTRS))
    assert data.num_groups == 5 and int(data.edge_index.max()) < 5
    s = data.summary
    # every op of the largest component counted once; tensor sizes add up
    assert data.x[:, 2].sum().item() == s["ops"] - s["dropped_ops"]
    assert s["params"] == 67 and s["batch_size"] == 5 and s["comm_mb"] == pytest.approx(268e-6)
    # op-frequency code of a group = sum over its ops of count(op)/total
    assert data.x[:, 0].sum().item() == pytest.approx(
        sum(vocab.code(d["op"]) for _, d in graph.nodes(data=True)), rel=1e-5)
    again = build_input(model, batch, loss_fn=loss, optimizer=opt, groups=5, vocabulary=vocab, features="rich")
    assert torch.equal(data.x, again.x) and torch.equal(data.edge_index, again.edge_index)
