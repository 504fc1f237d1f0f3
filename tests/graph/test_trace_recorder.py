"""The dispatch recorder records what make_fx recorded: same ops, names, sizes, FLOPs and graph.

The reference is ``make_fx(tracing_mode="real")`` — what the builder traced with before — read
into the same :class:`OpNode` records and swapped in for ``trace._record``.
"""
import pytest
import torch
from torch import nn

from driple.graph import trace
from driple.graph.flops import flop_formula
from driple.graph.opgraph import build_op_graph
from driple.graph.trace import OpNode, StepGraph, trace_training_step


def make_fx_record(fn, inputs, fake_mode):
    """``trace._record`` done with make_fx, node attributes computed as the fx-based builder did."""
    from torch.fx.experimental.proxy_tensor import make_fx

    with fake_mode:
        gm = make_fx(fn, tracing_mode="real")(*inputs)
    ours, nodes = {}, []
    for n in gm.graph.nodes:
        if n.op not in ("placeholder", "call_function"):
            continue  # get_attr constants stand for nothing
        node = OpNode(n.name, n.op, n.target if n.op == "call_function" else None,
                      tuple(ours[a] for a in n.all_input_nodes if a in ours))
        val = n.meta.get("val")
        node.out_numel, node.out_bytes = trace._tensor_size(val)
        node.flops = node.out_numel
        formula = flop_formula(n.target)
        if formula is not None:
            args = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in n.args]
            kwargs = {k: v.meta.get("val") if isinstance(v, torch.fx.Node) else v for k, v in n.kwargs.items()}
            try:
                node.flops = int(formula(*args, out_val=val, **kwargs))
            except Exception:  # noqa: BLE001
                pass
        ours[n] = node
        nodes.append(node)
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    placeholders = [ours[n] for n in gm.graph.nodes if n.op == "placeholder"]
    return StepGraph(nodes), placeholders, [ours.get(o) if isinstance(o, torch.fx.Node) else None for o in outs]


def flat(graph: StepGraph):
    """Each node as a tuple. A profiler op's inputs are left out: make_fx also links the
    record-function handle (a script object, not a tensor) from enter to exit; the recorder
    follows tensors only, and the op graph drops profiler ops whatever they read."""
    return [(n.name, n.op, str(n.target),
             () if str(n.target).startswith("profiler.") else tuple(a.name for a in n.all_input_nodes),
             n.out_numel, n.out_bytes, n.flops) for n in graph.nodes]


class TinyTransformer(nn.Module):
    """Embedding, layer norm, attention via SDPA, GELU MLP, dropout, a torch.tensor constant."""

    def __init__(self, vocab=11, width=8, heads=2):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(1, 6, width))
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.mlp = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, width))
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + att.transpose(1, 2).reshape(b, t, c) * torch.tensor(0.5).item()  # constant-folded
        return self.head(x + self.mlp(x))


class BatchNormNet(nn.Module):
    """Conv (frozen) + batch norm + in-place ReLU + max pool (a tuple output)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.conv.weight.requires_grad_(False)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.fc = nn.Linear(4 * 2 * 4, 3)

    def forward(self, x):
        y, _ = self.pool(torch.relu_(self.bn(self.conv(x))))
        return self.fc(y.flatten(1))


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True)
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


CASES = {
    "mlp-adam": lambda: (nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)),
                         (torch.randn(5, 4), torch.randint(0, 3, (5,))), None, "adam"),
    "transformer-adamw": lambda: (TinyTransformer(), (torch.randint(0, 11, (2, 6)), torch.randint(0, 11, (2, 6))),
                                  None, "adamw"),
    "batchnorm-sgd": lambda: (BatchNormNet(), (torch.randn(2, 1, 4, 8), torch.randint(0, 3, (2,))),
                              nn.functional.cross_entropy, "sgd"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_trace_and_op_graph_as_make_fx(case, monkeypatch):
    torch.manual_seed(0)
    model, batch, loss, optimizer = CASES[case]()
    ours = trace_training_step(model, batch, loss_fn=loss, optimizer=optimizer)
    monkeypatch.setattr(trace, "_record", make_fx_record)
    ref = trace_training_step(model, batch, loss_fn=loss, optimizer=optimizer)

    assert flat(ours.graph_module) == flat(ref.graph_module)
    assert flat(ours.update.graph_module) == flat(ref.update.graph_module)
    assert [n and n.name for n in ours.grad_nodes] == [n and n.name for n in ref.grad_nodes]
    assert ours.loss_node.name == ref.loss_node.name
    a, b = build_op_graph(ours), build_op_graph(ref)
    assert list(a.nodes(data=True)) == list(b.nodes(data=True))
    assert list(a.edges) == list(b.edges)
    assert a.graph["sources"] == b.graph["sources"] and a.graph["param_users"] == b.graph["param_users"]


def test_lstm_traces_the_same_every_time():
    # CPU LSTM's backward returns one tensor as both bias gradients, so eager PyTorch copies one
    # of them (new_empty_strided + copy_). torch's fake-tensor cache returns two tensors from the
    # second call on; make_fx then lost the copy, and a model's graph changed after its first
    # trace in a process (lstm_lm: 82 ops, then 78). Both layers here have the copy, every time.
    torch.manual_seed(0)
    model, batch = LSTMNet(), (torch.randn(2, 6, 4), torch.randint(0, 3, (2,)))
    first, second = (flat(trace_training_step(model, batch).graph_module) for _ in range(2))
    assert first == second
    assert [op for _, _, op, *_ in first].count("aten.copy_.default") == 2


def test_gradients_are_not_copied(mlp_step):
    # A strong reference to a gradient would stop AccumulateGrad stealing it: it would copy it
    # (new_empty_strided + copy_) and the graph would grow by two ops per parameter.
    model, batch, loss, opt = mlp_step
    traced = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    ops = {str(n.target) for n in traced.graph_module.nodes}
    assert not ops & {"aten.new_empty_strided.default", "aten.copy_.default"}


def test_frozen_parameters_are_read_as_inputs(cnn_step):
    model, batch, loss, opt = cnn_step
    model[0].weight.requires_grad_(False)
    traced = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    assert "0.weight" not in traced.param_names and traced.num_params == 2 + 18 * 2 + 2
    conv = [d for _, d in build_op_graph(traced).nodes(data=True) if d["op"] == "convolution"][0]
    assert conv["flops"] == 648  # the FLOP formula sees the frozen weight, as for a trainable one
    # it reads the images (2x1x5x5 fp32 = 200 B), the frozen weight (2x1x3x3 = 72 B), the bias (8 B)
    assert conv["in_bytes"] == 200 + 72 + 8


def test_step_graph_reads_like_a_graph_module(mlp_step):
    model, batch, loss, opt = mlp_step
    traced = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    assert traced.graph_module.graph.nodes is traced.graph_module.nodes
    assert [n.op for n in traced.param_nodes] == ["placeholder"] * 4
