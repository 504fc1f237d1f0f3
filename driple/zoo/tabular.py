"""Fully connected classifier on feature vectors: the mlp family.

Inputs are float ``[B, input_dim]``; outputs are logits ``[B, num_classes]``.
"""
from __future__ import annotations

from torch import Tensor, nn

from driple.zoo.registry import Family, Knob, register_family, register_preset
from driple.zoo.tasks import FEATURE_CLASSIFICATION


def _in_range(low, high):
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


class MLP(nn.Module):
    """``layers`` hidden Linear-ReLU(-Dropout) layers of ``hidden`` units, then a Linear."""

    def __init__(self, input_dim: int = 784, hidden: int = 1024, layers: int = 3, num_classes: int = 10,
                 dropout: float = 0.0) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        width = input_dim
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.ReLU(inplace=True)]
            if dropout > 0:
                blocks.append(nn.Dropout(dropout))
            width = hidden
        blocks.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


register_family(Family(
    name="mlp",
    description="multi-layer perceptron on flat feature vectors; default 3 hidden layers of 1024 "
    "on 784 inputs (MNIST-sized)",
    knobs=(
        Knob("input_dim", 784, "features per sample", check=_in_range(1, 1_000_000)),
        Knob("hidden", 1024, "units per hidden layer", check=_in_range(1, 65536)),
        Knob("layers", 3, "hidden layers", check=_in_range(0, 64)),
        Knob("num_classes", 10, "number of output classes", check=_in_range(2, 1_000_000)),
        Knob("dropout", 0.0, "dropout probability after each hidden layer", check=_in_range(0.0, 0.9)),
    ),
    build=lambda c: MLP(c["input_dim"], c["hidden"], c["layers"], c["num_classes"], c["dropout"]),
    task=lambda c: FEATURE_CLASSIFICATION,
    default_batch_size=256,
))

register_preset("mlp_mnist", "mlp", "784-800-800-10 MLP for MNIST (Simard et al. 2003 size)",
                input_dim=784, hidden=800, layers=2)
register_preset("mlp_cifar", "mlp", "3072-1024x3-10 MLP on flattened CIFAR-10 images",
                input_dim=3072, hidden=1024, layers=3, batch_size=64)
register_preset("mlp_large", "mlp", "4 hidden layers of 8192 on flattened CIFAR-10 (235 M params, "
                "network-heavy)", full_size=True, input_dim=3072, hidden=8192, layers=4, batch_size=64)
