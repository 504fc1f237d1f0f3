"""The command-line tests run torch on one thread (fixtures: ``tests/conftest.py``)."""
import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_thread(torch_one_thread):
    yield
