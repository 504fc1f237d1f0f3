"""Tracing a whole training step and turning it into an op graph (answers worked out by hand)."""
from collections import Counter

import pytest
import torch
from torch import nn

from driple.errors import DripleError
from driple.graph.opgraph import build_op_graph
from driple.graph.trace import trace_training_step


def ops_by_phase(graph):
    out = {}
    for _, d in graph.nodes(data=True):
        out.setdefault(d["phase"], Counter())[d["op"]] += 1
    return out


def test_mlp_step_op_counts(mlp_step):
    model, batch, loss, opt = mlp_step
    traced = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    assert traced.num_params == 4 * 8 + 8 + 8 * 3 + 3 == 67
    assert traced.batch_size == 5
    assert all(g is not None for g in traced.grad_nodes)
    phases = ops_by_phase(build_op_graph(traced))
    # forward: two affine layers (addmm), one ReLU, log-softmax + NLL
    assert phases["forward"]["addmm"] == 2
    assert phases["forward"]["relu"] == 1
    assert phases["forward"]["_log_softmax"] == 1 and phases["forward"]["nll_loss_forward"] == 1
    # backward: dW2, dX2 and dW1 are matmuls (the input needs no grad), two bias sums, one ReLU grad
    assert phases["backward"]["mm"] == 3
    assert phases["backward"]["sum"] == 2
    assert phases["backward"]["threshold_backward"] == 1
    # optimizer, per parameter: buf.mul_(0.9).add_(g); p.add_(buf, alpha=-lr) → 4 mul_, 8 add_
    assert phases["optimizer"] == Counter({"add_": 8, "mul_": 4})


def test_update_replicated_per_parameter_with_its_size(mlp_step):
    model, batch, loss, opt = mlp_step
    graph = build_op_graph(trace_training_step(model, batch, loss_fn=loss, optimizer=opt))
    updates = [d for _, d in graph.nodes(data=True) if d["phase"] == "optimizer"]
    # three param-sized outputs per parameter (buf.mul_, buf.add_, p.add_): 3 x 67 floats
    assert sum(d["out_bytes"] for d in updates) == 3 * 67 * 4
    # each parameter's update reads that parameter's gradient
    grads_in = {u for u, v in graph.edges if graph.nodes[v]["phase"] == "optimizer"
                and graph.nodes[u]["phase"] == "backward"}
    assert len(grads_in) == 4


def test_cnn_node_sizes_and_flops(cnn_step):
    model, batch, loss, opt = cnn_step
    graph = build_op_graph(trace_training_step(model, batch, loss_fn=loss, optimizer=opt))
    conv = [d for _, d in graph.nodes(data=True) if d["op"] == "convolution"]
    assert len(conv) == 1
    # output 2 x 2 x 3 x 3 fp32 = 144 bytes; FLOPs = 2 * B*Cout*H*W * Cin*k*k = 2*2*2*9*1*9
    assert conv[0]["out_bytes"] == 144
    assert conv[0]["flops"] == 648
    assert Counter(d["op"] for _, d in graph.nodes(data=True))["convolution_backward"] == 1


def test_trace_leaves_model_untouched(mlp_step):
    model, batch, loss, opt = mlp_step
    before = [p.detach().clone() for p in model.parameters()]
    model.eval()
    trace_training_step(model, batch, loss_fn=loss, optimizer="adamw")
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())
    assert not model.training


def test_adam_steady_state_update(mlp_step):
    model, batch, loss, _ = mlp_step
    graph = build_op_graph(trace_training_step(model, batch, loss_fn=loss, optimizer="adam"))
    opt_ops = ops_by_phase(graph)["optimizer"]
    # Adam, per parameter: exp_avg.lerp_, exp_avg_sq.mul_().addcmul_(), sqrt, p.addcdiv_
    assert opt_ops["lerp_"] == 4 and opt_ops["addcmul_"] == 4 and opt_ops["addcdiv_"] == 4
    assert "clone" not in opt_ops  # first-step buffer creation is not the steady state


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if x.sum() > 0:  # a decision on tensor values
            return self.fc(x)
        return -self.fc(x)


def test_data_dependent_control_flow_is_explained():
    with pytest.raises(DripleError, match="depend on tensor values"):
        trace_training_step(DataDependent(), (torch.randn(3, 4), torch.randint(0, 2, (3,))))


class LossOnValidLabels(nn.Module):
    """A Hugging Face-style head computing its own loss from ``labels``, keeping the valid ones
    by value (DeBERTa-v2's ``(labels >= 0).nonzero()``)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, features=None, labels=None):
        logits = self.fc(features)
        if labels is None:
            return {"logits": logits}
        keep = (labels >= 0).nonzero().view(-1)
        return {"logits": logits, "loss": nn.functional.cross_entropy(logits[keep], labels[keep])}


def test_labels_selected_by_value_point_to_passing_them_as_targets():
    x, y = torch.randn(3, 4), torch.randint(0, 3, (3,))
    with pytest.raises(DripleError, match=r"depend on tensor values.*return them as targets instead"):
        trace_training_step(LossOnValidLabels(), ({"features": x, "labels": y}, None))
    traced = trace_training_step(LossOnValidLabels(), ({"features": x}, y))  # as the message says
    assert traced.batch_size == 3
    with pytest.raises(DripleError) as err:  # no labels among the inputs: no such hint
        trace_training_step(DataDependent(), (torch.randn(3, 4), torch.randint(0, 2, (3,))))
    assert "targets instead" not in str(err.value)


def test_forward_failure_is_explained(mlp_step):
    model, _, loss, opt = mlp_step
    with pytest.raises(DripleError, match="failed on the example batch"):
        trace_training_step(model, (torch.randn(5, 7), torch.randint(0, 3, (5,))), loss_fn=loss)


def test_not_a_module():
    with pytest.raises(DripleError, match="nn.Module"):
        trace_training_step(lambda x: x, torch.randn(2))


class KeywordMLP(nn.Module):
    """The mlp_step model, but its forward takes keywords like a Hugging Face model
    (``features=``, ``scale=``) and returns a dict-shaped output (``logits``)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, features=None, scale=None):
        logits = self.inner(features)
        return {"logits": logits if scale is None else logits * scale}


def test_dict_inputs_are_keyword_arguments(mlp_step):
    """The same model fed a tensor and a dict of keyword inputs traces to the same ops (the
    dict's tensors are one input, read by the first layer); the batch size is the first
    dimension of the first input."""
    model, batch, loss, opt = mlp_step
    plain = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    keyword = trace_training_step(KeywordMLP(model), ({"features": batch[0]}, batch[1]),
                                  loss_fn=lambda out, y: loss(out["logits"], y), optimizer=opt)
    assert keyword.batch_size == 5 and keyword.num_params == plain.num_params == 67
    ops = [(n.name, str(n.target)) for n in plain.graph_module.nodes]
    assert [(n.name, str(n.target)) for n in keyword.graph_module.nodes] == ops
    for traced in (plain, keyword):  # the first layer reads the input (the dict's tensor)
        addmm = next(n for n in traced.graph_module.nodes if str(n.target) == "aten.addmm.default")
        assert "arg0_1" in [i.name for i in addmm.all_input_nodes]
    assert keyword.graph_module.nodes[0].out_bytes == 5 * 4 * 4  # 5 x 4 float32 inputs
    # a second keyword input is used: one more op (the multiplication) in forward and backward
    scaled = trace_training_step(KeywordMLP(model), ({"features": batch[0], "scale": torch.ones(3)}, batch[1]),
                                 loss_fn=lambda out, y: loss(out["logits"], y), optimizer=opt)
    assert Counter(str(n.target) for n in scaled.graph_module.nodes)["aten.mul.Tensor"] >= 2


def test_errors_blame_the_part_that_failed(mlp_step):
    """A failing forward, default loss or given loss_fn is each named as such: the default loss
    is never blamed on a loss_fn the user did not pass, nor the reverse."""
    model, batch, loss, opt = mlp_step
    with pytest.raises(DripleError, match="in the model's forward") as err:
        trace_training_step(model, ({"wrong": batch[0]}, batch[1]))
    assert "loss" not in str(err.value).split("(")[0]
    with pytest.raises(DripleError, match="default loss") as err:  # logits [5, 3] vs targets [2]
        trace_training_step(model, (batch[0], torch.tensor([0, 1])))
    assert "loss_fn you gave" not in str(err.value)

    def my_loss(out, y):
        return out.logits.sum()  # a tensor has no .logits

    with pytest.raises(DripleError, match="in the loss_fn you gave") as err:
        trace_training_step(model, batch, loss_fn=my_loss)
    assert "default loss" not in str(err.value)
    with pytest.raises(DripleError, match="loss function must return a scalar"):
        trace_training_step(model, batch, loss_fn=lambda out, y: out)


def test_grouped_convolution_backward_flops_carry_the_groups():
    """Depthwise 3x3 convs (4 channels, groups=4) on 2x4x5x5, padding 1: a forward is
    2 * B*Cout*H*W * (Cin/groups)*k*k = 2*2*4*25*1*9 = 3600 FLOPs; each gradient costs as much.
    The second conv's backward computes both gradients (7200), the first only its weight's (the
    batch needs no gradient: 3600). torch's own formula charges the weight gradient as a dense
    4x4 conv (4x)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False),
                          nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False),
                          nn.Flatten(), nn.Linear(100, 2))
    batch = (torch.randn(2, 4, 5, 5), torch.randint(0, 2, (2,)))
    graph = build_op_graph(trace_training_step(model, batch, loss_fn=nn.functional.cross_entropy,
                                               optimizer="sgd"))
    flops = {op: sorted(d["flops"] for _, d in graph.nodes(data=True) if d["op"] == op)
             for op in ("convolution", "convolution_backward")}
    assert flops == {"convolution": [3600, 3600], "convolution_backward": [3600, 7200]}


def test_recurrent_layer_flops_count_their_weights_per_token():
    """nn.LSTM(3 -> 4) on a [2, 5, 3] batch: 10 tokens through W_ih [16, 3] and W_hh [16, 4]:
    2 * 10 * (48 + 64) = 2240 FLOPs forward (CPU: mkldnn_rnn_layer), twice that backward. torch
    has no formula for these ops and counted one per output element."""
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = nn.LSTM(3, 4, batch_first=True), nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])

    torch.manual_seed(0)
    graph = build_op_graph(trace_training_step(Tagger(), (torch.randn(2, 5, 3), torch.randint(0, 2, (2,))),
                                               loss_fn=nn.functional.cross_entropy, optimizer="sgd"))
    flops = {d["op"]: d["flops"] for _, d in graph.nodes(data=True) if "rnn" in d["op"]}
    assert flops == {"mkldnn_rnn_layer": 2240, "mkldnn_rnn_layer_backward": 4480}


def test_cudnn_recurrent_flops_by_hand():
    """The GPU form (all layers at once), checked on shapes: a 2-layer LSTM 3 -> 4 has W_ih
    [16, 3], W_hh [16, 4] then [16, 4], [16, 4] (+ biases, not counted): 48 + 3 * 64 = 240
    weight elements; a padded [5, 2, 3] input is 10 tokens (2 * 10 * 240 = 4800), a packed [7, 3]
    one 7."""
    from driple.graph.flops import cudnn_rnn_backward_flops, cudnn_rnn_flops

    weights = [(16, 3), (16, 4), (16,), (16,), (16, 4), (16, 4), (16,), (16,)]
    rest = (4, None, (2, 2, 4), (2, 2, 4), 2, 4, 0, 2, False, 0.0, True, False)
    assert cudnn_rnn_flops((5, 2, 3), weights, *rest, [], None) == 4800
    assert cudnn_rnn_flops((7, 3), weights, *rest, [2, 2, 2, 1], None) == 2 * 7 * 240
    back = (4, None, (2, 2, 4), (2, 2, 4), (5, 2, 4), (5, 2, 4), None, None, 2, 4, 0, 2, False, 0.0,
            True, False, [], None, (100,))
    assert cudnn_rnn_backward_flops((5, 2, 3), weights, *back, [True, False, False, True]) == 9600
    assert cudnn_rnn_backward_flops((5, 2, 3), weights, *back, [False, False, False, True]) == 4800
