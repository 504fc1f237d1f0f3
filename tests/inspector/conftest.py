"""Fixtures of the inspector tests: a tiny dataset directory with synthetic targets."""
from __future__ import annotations

import pytest
import torch
from inspector_helpers import fake_builder, write_dataset


@pytest.fixture
def dataset_dir(tmp_path):
    return write_dataset(tmp_path / "cpu-ddp-w2-lo")


@pytest.fixture
def dataset(dataset_dir):
    from driple.inspector.dataset import InspectorDataset

    return InspectorDataset(dataset_dir, builder=fake_builder, builder_id="fake", progress=False)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """The models here are tiny: several OpenMP threads on a shared machine only spin."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
