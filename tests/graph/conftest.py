"""Tiny hand-checkable training steps shared by the input-builder tests."""
import pytest
import torch
from torch import nn


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


@pytest.fixture
def mlp_step():
    """2-layer MLP 4→8→3, batch 5, cross-entropy, SGD with momentum: 67 parameters."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    batch = (torch.randn(5, 4), torch.randint(0, 3, (5,)))
    return model, batch, nn.functional.cross_entropy, sgd


@pytest.fixture
def cnn_step():
    """One 3x3 conv (1→2 channels) on 1x5x5 images, then Linear(18→2); batch 2."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(18, 2))
    batch = (torch.randn(2, 1, 5, 5), torch.randint(0, 2, (2,)))
    return model, batch, nn.functional.cross_entropy, sgd
