"""A new strategy and a new predicted target are registrations, nothing more.

A toy strategy (``toy``: every worker gossips its whole gradient once per step) and a toy
job-level target (``toy_rate``, in 1/s) are registered here, and only here: setting ids, the
graph builder, the graph cache, ``driple graph``, the launcher, the inspector's outputs, its
checkpoint, the profile, its JSON and the ``driple predict`` table all take them up.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.metrics import METRICS, Target, register_target, target_names, unit, unregister
from driple.settings import Setting, parse_setting
from driple.strategies import Strategy, register_strategy, unregister_strategy

GROUPS = {"groups": 8, "grouping": "uniform", "features": "driple"}


def gossip(graph, traced, setting):
    """The toy strategy's communication: one node sending every gradient to each other worker."""
    total = sum(traced.param_bytes)
    graph.add_node("gossip", op="comm.gossip", phase="comm", out_bytes=total * (setting.workers - 1),
                   in_bytes=total, flops=0, bucket_bytes=total)
    for node, data in list(graph.nodes(data=True)):
        if data["phase"] == "optimizer":  # every update waits for the gossip
            graph.add_edge("gossip", node)
    return [{"params": list(range(len(traced.param_bytes))), "bytes": total}]


def at_most_8_workers(setting):
    if setting.workers > 8:
        raise DripleError("gossip among more than 8 workers is not a toy")


@pytest.fixture
def toy_strategy():
    register_strategy(Strategy(name="toy", description="gossip", ranks_id="w{workers}",
                               graph_key="toy-w{workers}", comm=gossip,
                               worker="driple.collect.workers.ddp",  # DDP's worker runs it for real
                               comm_units="gossip rounds", validate=at_most_8_workers))
    yield
    unregister_strategy("toy")


@pytest.fixture
def toy_target():
    register_target(Target("toy_rate", unit="1/s", label="toy rate"))
    yield
    unregister("toy_rate")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_a_toy_strategy_is_a_setting_a_graph_and_a_cache_key(toy_strategy, capsys):
    from driple.cli import main
    from driple.graph.build import build_input
    from driple.inspector.dataset import graph_setting

    s = parse_setting("cpu-toy-w3-1g")
    assert (s.strategy, s.workers, s.servers, s.link_bps) == ("toy", 3, 0, 1e9) and s.id == "cpu-toy-w3-1g"
    with pytest.raises(DripleError, match="a toy setting has no parameter servers"):
        parse_setting("cpu-toy-p1w3-1g")
    with pytest.raises(DripleError, match="toy is always synchronous; '-async' applies to 'ps' settings only"):
        parse_setting("cpu-toy-w3-1g-async")
    with pytest.raises(DripleError, match="more than 8 workers"):
        parse_setting("cpu-toy-w9-1g")
    with pytest.raises(DripleError, match=r"use 'ddp' \(all-reduce\), 'fsdp' \(sharded data parallel\), "
                                          r"'ps' \(parameter server\) or 'toy' \(gossip\)"):
        Setting(strategy="zero")
    assert graph_setting("cpu-toy-w3-1g") == graph_setting("cpu-toy-w3-lo") == "toy-w3"

    batch = (torch.randn(4, 8), torch.randint(0, 4, (4,)))
    data = build_input(mlp(), batch, strategy="cpu-toy-w3-lo", **GROUPS)
    params = 8 * 16 + 16 + 16 * 4 + 4
    s = data.summary
    assert s["strategy"] == "toy" and s["workers"] == 3 and s["comm_nodes"] == 1
    assert s["comm_mb"] == pytest.approx(params * 4 * 2 / 1e6) and s["buckets_mb"] == [params * 4 / 1e6]
    assert build_input(mlp(), batch, strategy="toy", workers=3, **GROUPS).summary["comm_mb"] == s["comm_mb"]

    assert main(["graph", "mlp", "--strategy", "toy", "--workers", "3", "--groups", "8"]) == 0
    assert "toy with 3 worker(s)" in capsys.readouterr().out


def test_a_toy_target_is_predicted_saved_and_shown(registry, toy_strategy, toy_target, tmp_path):
    from driple.graph.build import build_input
    from driple.inspector.checkpoint import TrainedInspector, load_inspector
    from driple.inspector.model import Inspector
    from driple.inspector.scaling import FeatureScaler, TargetScaler
    from driple.inspector.train import feature_names_for
    from driple.predict.formatting import format_profile
    from driple.predict.intervals import ConformalIntervals
    from driple.predict.predictor import Predictor

    names = target_names()
    assert names[-1] == "toy_rate" and len(names) == len(METRICS) + 2  # the 12, the step time (labels v2), the toy and unit("toy_rate") == "1/s"
    graphs = [build_input(mlp(), (torch.randn(b, 8), torch.randint(0, 4, (b,))), strategy="cpu-toy-w2-lo",
                          **GROUPS) for b in (2, 4, 8)]
    features = feature_names_for("driple", graphs[0].x.size(1))
    y = np.random.default_rng(0).uniform(1, 10, size=(3, len(names)))
    torch.manual_seed(0)
    inspector = TrainedInspector(
        Inspector(len(features), hidden_channels=8, num_repeats=2, out_channels=len(names)),
        FeatureScaler(features).fit(graphs), TargetScaler("max").fit(y),
        {"setting": "cpu-toy-w2-lo", "builder": GROUPS, "feature_set": "driple",
         "vocab_digest": graphs[0].vocab_digest})
    pred = np.clip(inspector.predict(graphs), 0, None)
    inspector.info["intervals"] = ConformalIntervals(0.9).fit(np.vstack([pred * 1.5, pred * 0.8]),
                                                             np.vstack([pred, pred])).to_dict()
    assert inspector.predict(graphs).shape == (3, len(names))

    loaded = load_inspector(inspector.save(str(tmp_path / "toy")))  # the names travel along
    assert loaded.targets == names
    predictor = Predictor(loaded)
    profile = predictor.predict(mlp(), (torch.randn(4, 8), torch.randint(0, 4, (4,))), name="mlp")
    assert list(profile.metrics) == list(names) and profile.metrics["toy_rate"] >= 0
    low, high = profile.intervals["toy_rate"]
    assert low <= profile.metrics["toy_rate"] <= high
    doc = json.loads(json.dumps(profile.to_dict()))
    assert doc["units"]["toy_rate"] == "1/s" and "toy_rate" in doc["metrics"]
    assert "toy_rate" not in doc["resources"]  # a job-level target, not a resource
    text = format_profile(profile, predictor.describe())
    assert any(line.startswith("toy rate") and "1/s [" in line for line in text.splitlines())
    assert "toy rate" in profile.describe()

    with pytest.raises(DripleError, match="lacks toy_rate"):  # a checkpoint of the declared targets only
        Predictor.load("cpu-ddp-w2-lo")
    declared = {m: 1.0 for m in names if m != "toy_rate"}
    from driple.predict.profile import ResourceProfile

    with pytest.raises(DripleError, match=r"missing \['toy_rate'\]"):
        ResourceProfile("cpu-toy-w2-lo", "x", declared)


@pytest.mark.slow
def test_the_launcher_starts_the_registered_worker(toy_strategy, tmp_path):
    """A real 2-worker job in cpu-toy-w2-lo: the launcher starts the toy's worker module (DDP's)."""
    from pathlib import Path

    from driple.collect import run_job
    from driple.collect.job import JobSpec

    workloads = Path(__file__).resolve().parent / "collect" / "conftest.py"
    spec = JobSpec(model=f"{workloads}:tiny_mlp", batch_size=16, knobs={"width": 256}, warmup=3)
    result = run_job(spec, "cpu-toy-w2-lo", seconds=3, out_dir=tmp_path, timeout=120)
    assert result.ok, result.row.get("reason")
    assert result.row["setting"] == "cpu-toy-w2-lo" and result.row["iterations"] >= 10
