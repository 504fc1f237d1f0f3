"""Job specs, ids and workload loading (no processes started)."""
from __future__ import annotations

from pathlib import Path

import pytest

from driple.collect.job import JobSpec, job_id
from driple.collect.launcher import _is_peer_loss, _last_error, default_timeout, roles
from driple.collect.workload import ModuleWorkload, load_workload
from driple.errors import DripleError
from driple.settings import parse_setting

HERE = Path(__file__).with_name("conftest.py")
TINY = f"{HERE}:tiny_mlp"


def test_spec_validates_and_round_trips():
    spec = JobSpec(model="resnet", batch_size=8, optimizer="Adam", knobs={"depth": 20})
    assert spec.optimizer == "adam"
    assert JobSpec.from_dict(spec.to_dict()) == spec
    assert JobSpec.from_dict({"name": "mlp", "batch_size": 4}).model == "mlp"  # sweep_configs spelling
    with pytest.raises(DripleError, match="optimizer"):
        JobSpec(model="resnet", optimizer="lbfgs")
    with pytest.raises(DripleError, match="batch size"):
        JobSpec(model="resnet", batch_size=0)
    with pytest.raises(DripleError, match="warm-up"):
        JobSpec(model="resnet", warmup=0)


def test_job_id_is_stable_and_distinguishes_jobs():
    a = JobSpec(model="resnet", batch_size=8, knobs={"depth": 20, "width": 1.0})
    b = JobSpec(model="resnet", batch_size=8, knobs={"width": 1.0, "depth": 20})
    assert job_id(a, "cpu-ddp-w2-lo", 10) == job_id(b, "cpu-ddp-w2-lo", 10.0)
    assert job_id(a, "cpu-ddp-w2-lo", 10).startswith("resnet-bs8-")
    assert job_id(a, "cpu-ddp-w2-lo", 10) != job_id(a, "cpu-ddp-w2-1g", 10)
    assert job_id(a, "cpu-ddp-w2-lo", 10) != job_id(a, "cpu-ddp-w2-lo", 5)
    assert job_id(JobSpec(model=TINY), "cpu-ddp-w2-lo", 1).startswith("tiny_mlp-bsd-")


def test_roles_put_servers_first():
    assert roles(parse_setting("cpu-ddp-w2-lo")) == ["worker0", "worker1"]
    assert roles(parse_setting("cpu-ps-p2w3-lo")) == ["server0", "server1", "worker0", "worker1", "worker2"]
    assert default_timeout(10) > 10


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
    m = load_workload(f"{HERE}:tiny_module", batch_size=3)
    assert isinstance(m, ModuleWorkload) and m.input_shape == (8,)
    x, y = m.make_batch()
    assert x.shape == (3, 8) and y is None
    assert m.model(x).shape == (3, 4)
    # a plain module trains on the mean squared output: (1 + 4 + 9 + 16) / 4
    assert m.loss_fn(torch.tensor([[1.0, -2.0], [3.0, -4.0]]), None).item() == pytest.approx(7.5)


def test_user_code_errors_are_explained(tmp_path):
    with pytest.raises(DripleError, match="no function"):
        load_workload(f"{HERE}:nope")
    with pytest.raises(DripleError, match="no such file"):
        load_workload(f"{tmp_path}/missing.py:f")
    with pytest.raises(DripleError, match="cannot import"):
        load_workload("no_such_module_xyz:f")
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef f():\n    return torch.nn.Linear(2, 2)\n")
    with pytest.raises(DripleError, match="input_shape"):
        load_workload(f"{bad}:f")


def test_failure_reason_prefers_the_root_cause(tmp_path):
    log = tmp_path / "w.log"
    log.write_text("Traceback (most recent call last):\n  File x\nRuntimeError: injected crash at 3\n")
    assert _last_error(log) == "RuntimeError: injected crash at 3"
    log.write_text("[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: bad\n[rank1]:  \n")
    assert _last_error(log) == "ValueError: bad"
    assert _last_error(tmp_path / "none.log") == "no output"
    assert _is_peer_loss("worker0 exited with code 1: RuntimeError: Connection closed by peer")
    assert not _is_peer_loss("worker1 exited with code 1: RuntimeError: injected crash at 3")
