"""Tiny models for the prediction tests."""
import torch


def tiny_mlp(hidden: int = 16):
    net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 4))
    net.input_shape = (8,)
    return net
