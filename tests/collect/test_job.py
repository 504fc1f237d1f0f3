"""Job specs, the one-line job syntax and stable job ids (no processes started)."""
from __future__ import annotations

from pathlib import Path

import pytest

from driple.collect.job import JobSpec, job_id, parse_knobs
from driple.errors import DripleError

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


def test_knobs_are_yaml_scalars():
    assert parse_knobs(["depth=50", "width=0.5", "bn=true", "name=abc"]) == {
        "depth": 50, "width": 0.5, "bn": True, "name": "abc"}
    with pytest.raises(Exception, match="knob=value"):
        parse_knobs(["depth"])


def test_one_line_jobs_parse():
    spec = JobSpec.parse("resnet, depth=56,bs=64,opt=adam", warmup=3)
    assert spec == JobSpec(model="resnet", knobs={"depth": 56}, batch_size=64, optimizer="adam", warmup=3)
    assert JobSpec.parse("pkg.mod:build") == JobSpec(model="pkg.mod:build")
    for text, words in (("depth=3", "cannot read job"), (",bs=2", "cannot read job"),
                        ("mlp,bs=x", "bs='x' in job 'mlp,bs=x' is not a positive integer"),
                        ("mlp,bs=0", "is not a positive integer"),
                        ("mlp,opt=lbfgs", "opt='lbfgs' in job 'mlp,opt=lbfgs': use sgd, adam or adamw"),
                        ("mlp,depth", "knob=value")):
        with pytest.raises(DripleError, match=words.replace("(", r"\(").replace(")", r"\)")):
            JobSpec.parse(text)


def test_job_id_is_stable_and_distinguishes_jobs():
    a = JobSpec(model="resnet", batch_size=8, knobs={"depth": 20, "width": 1.0})
    b = JobSpec(model="resnet", batch_size=8, knobs={"width": 1.0, "depth": 20})
    assert job_id(a, "cpu-ddp-w2-lo", 10) == job_id(b, "cpu-ddp-w2-lo", 10.0)
    assert job_id(a, "cpu-ddp-w2-lo", 10).startswith("resnet-bs8-")
    assert job_id(a, "cpu-ddp-w2-lo", 10) != job_id(a, "cpu-ddp-w2-1g", 10)
    assert job_id(a, "cpu-ddp-w2-lo", 10) != job_id(a, "cpu-ddp-w2-lo", 5)
    assert job_id(JobSpec(model=TINY), "cpu-ddp-w2-lo", 1).startswith("tiny_mlp-bsdefault-")
