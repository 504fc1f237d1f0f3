"""The zoo's optimizers by name: their defaults, their mistakes, and that each traces."""
from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from driple.errors import DripleError
from driple.zoo import OPTIMIZERS, build_workload, make_optimizer


def test_optimizers():
    params = [torch.nn.Parameter(torch.zeros(3))]
    assert isinstance(make_optimizer("sgd", params), torch.optim.SGD)
    assert make_optimizer("sgd", params).defaults["momentum"] == 0.9
    assert isinstance(make_optimizer("Adam", params, lr=0.1), torch.optim.Adam)
    assert isinstance(make_optimizer("adamw", params), torch.optim.AdamW)


def test_bad_optimizer_and_learning_rate():
    with pytest.raises(DripleError, match="'adam'"):
        make_optimizer("adma", [torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(DripleError, match="learning rate"):
        make_optimizer("sgd", [torch.nn.Parameter(torch.zeros(1))], lr=-1)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_optimizer_traces(optimizer, training_step):
    w = build_workload("mlp", batch_size=2, hidden=16, layers=1)
    opt = make_optimizer(optimizer, w.model.parameters())
    graph = make_fx(training_step(w, opt), tracing_mode="fake", _allow_non_fake_inputs=True)(*w.example_batch)
    assert len(graph.graph.nodes) > 20
