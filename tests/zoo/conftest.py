"""Fixtures of the zoo tests."""
from __future__ import annotations

import pytest


def make_training_step(workload, optimizer):
    """``step(inputs, targets) -> loss``: forward, loss, backward, optimizer step and zero_grad."""
    def step(inputs, targets):
        loss = workload.loss_fn(workload.model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step


@pytest.fixture
def training_step():
    """Function ``(workload, optimizer) -> step(inputs, targets)``, one training step to trace."""
    return make_training_step
