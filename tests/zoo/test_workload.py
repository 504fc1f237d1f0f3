"""What a job trains: zoo names and user factories as workloads, and their shape-only forms."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from driple.errors import DripleError
from driple.zoo.registry import Workload
from driple.zoo.workload import ModuleWorkload, example_batch, load_workload, to_meta

#: The collector tests' user-code workloads (tiny_mlp: a workload object, tiny_module: a module).
USER = Path(__file__).resolve().parents[1] / "collect" / "conftest.py"
TINY = f"{USER}:tiny_mlp"


def test_user_workload_and_plain_module():
    import math

    import torch

    w = load_workload(TINY, batch_size=4, knobs={"width": 16})
    x, y = w.make_batch(4)
    assert x.shape == (4, 64) and w.loss_fn(w.model(x), y).ndim == 0
    # the knob reached the factory: Linear 64->16, 16->16, 16->10 (depth 2) = 1040 + 272 + 170
    assert sum(p.numel() for p in w.model.parameters()) == 1482
    # cross-entropy of all-zero logits over 10 classes is log(10)
    assert w.loss_fn(torch.zeros(4, 10), y).item() == pytest.approx(math.log(10))
    m = load_workload(f"{USER}:tiny_module", batch_size=3)
    assert isinstance(m, ModuleWorkload) and m.input_shape == (8,)
    x, y = m.make_batch()
    assert x.shape == (3, 8) and y is None
    assert m.model(x).shape == (3, 4)
    # a plain module trains on the mean squared output: (1 + 4 + 9 + 16) / 4
    assert m.loss_fn(torch.tensor([[1.0, -2.0], [3.0, -4.0]]), None).item() == pytest.approx(7.5)


def test_user_code_errors_are_explained(tmp_path):
    with pytest.raises(DripleError, match="no function"):
        load_workload(f"{USER}:nope")
    with pytest.raises(DripleError, match="no such file"):
        load_workload(f"{tmp_path}/missing.py:f")
    with pytest.raises(DripleError, match="cannot import"):
        load_workload("no_such_module_xyz:f")
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef f():\n    return torch.nn.Linear(2, 2)\n")
    with pytest.raises(DripleError, match="input_shape"):
        load_workload(f"{bad}:f")
    with pytest.raises(DripleError, match="input_shape"):
        load_workload(f"{bad}:f", shapes_only=True)


def test_shapes_only_builds_on_meta_and_falls_back(tmp_path):
    zoo = load_workload("mlp", batch_size=5, knobs={"hidden": 16, "layers": 1}, shapes_only=True)
    assert isinstance(zoo, Workload) and all(p.is_meta for p in zoo.model.parameters())
    real = load_workload("mlp", batch_size=5, knobs={"hidden": 16, "layers": 1})
    assert [p.shape for p in zoo.model.parameters()] == [p.shape for p in real.model.parameters()]
    user = load_workload(f"{USER}:tiny_module", batch_size=3, shapes_only=True)
    assert all(p.is_meta for p in user.model.parameters())
    code = tmp_path / "reads_values.py"  # a factory that reads a tensor's value cannot run on meta
    code.write_text("import torch\n"
                    "def build():\n    m = torch.nn.Linear(3, 2)\n    torch.nn.init.ones_(m.weight)\n"
                    "    if m.weight.sum().item() != 6.0:\n        raise ValueError('bad init')\n"
                    "    m.input_shape = (3,)\n    return m\n")
    built = load_workload(f"{code}:build", shapes_only=True)
    assert not any(p.is_meta for p in built.model.parameters())
    assert built.model.weight.sum().item() == 6.0


def test_example_batches_are_meta_at_any_size():
    zoo = load_workload("mlp", knobs={"hidden": 16, "layers": 1}, shapes_only=True)
    x, y = example_batch(zoo, 10**9)  # 10^9 samples: as cheap as one
    real_x, real_y = zoo.make_batch(2)
    assert x.is_meta and y.is_meta and x.shape[0] == y.shape[0] == 10**9
    assert x.shape[1:] == real_x.shape[1:] and (x.dtype, y.dtype) == (real_x.dtype, real_y.dtype)
    assert example_batch(zoo)[0].shape[0] == zoo.batch_size
    mod = load_workload(f"{USER}:tiny_module", batch_size=7, shapes_only=True)
    x, y = example_batch(mod, 10**9)
    assert x.is_meta and x.shape == (10**9, 8) and y is None
    user = load_workload(TINY, batch_size=4, knobs={"width": 16})  # its own make_batch, moved to meta
    x, y = example_batch(user, 4)
    assert x.is_meta and x.shape == (4, 64) and y.dtype == torch.long
    nested = to_meta({"a": (torch.zeros(2), [torch.ones(3)]), "n": 1})
    assert nested["a"][0].is_meta and nested["a"][1][0].is_meta and nested["n"] == 1
