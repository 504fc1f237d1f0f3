"""Labels v2 (the declared labels) and v1 side by side: memory amounts in MB and the step time as a predicted
target, end to end (dataset, a tiny trained hybrid checkpoint, profile, throughput, intervals,
bounds, JSON, the predict table and command), and the v1 files refused by name."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.metrics import label_version, target_names, unit, use_labels

SETTING = "cpu-ddp-w2-lo"
GROUPS = {"groups": 8, "grouping": "uniform", "features": "driple"}
HOST = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")


@pytest.fixture
def labels_v2():
    """The v2 declaration for one test (the declared one; conftest restores it after a test that
    switches to v1)."""
    use_labels("v2")
    assert label_version() == "v2"
    yield


def mlp(hidden: int):
    torch.manual_seed(hidden)
    net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 4))
    net.input_shape = (8,)
    return net


def v2_graphs():
    """Real graphs of tiny MLPs with 13 synthetic targets (memory in MB, step time in s)."""
    from driple.graph.build import build_input

    graphs = []
    for i, (hidden, bs) in enumerate([(h, b) for h in (8, 16, 32, 64) for b in (2, 4, 8)]):
        g = build_input(mlp(hidden), (torch.randn(bs, 8), torch.randint(0, 4, (bs,))), strategy=SETTING,
                        **GROUPS)
        step = 0.01 + 1e-4 * hidden * bs
        y = [95.0, step * 0.8, step * 0.2, 150.0 + hidden, step * 0.5, step * 0.5,
             400.0, step * 0.1, step * 0.9, 410.0, step * 0.1, step * 0.9, step]
        g.y = torch.tensor([y], dtype=torch.float32)
        g.setting, g.job_id = SETTING, f"j{i}"
        graphs.append(g)
    return graphs


def test_the_declaration_switches_both_ways(labels_v2):
    names = target_names()
    assert len(names) == 13 and names[-1] == "step_time" and unit("step_time") == "s"
    assert unit("memory_burst_amount") == "MB" and names[:3] == ("compute_burst_amount",
                                                                 "compute_burst_duration",
                                                                 "compute_idle_duration")
    use_labels("v1")
    assert len(target_names()) == 12 and unit("memory_burst_amount") == "%"
    use_labels("v2")
    with pytest.raises(DripleError, match="unknown label version"):
        use_labels("v3")


def test_a_v2_checkpoint_end_to_end(registry, v1_models_root, monkeypatch, labels_v2, tmp_path, capsys):
    from driple.cli import main
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.train import preset, train_inspector
    from driple.predict.bounds import bound
    from driple.predict.colocate import slot_capacity
    from driple.predict.formatting import format_profile
    from driple.predict.intervals import calibrate_intervals, test_coverage
    from driple.predict.predictor import Predictor

    graphs = v2_graphs()
    train, val, calibration, test = graphs[:6], graphs[6:8], graphs[8:10], graphs[10:]
    config, options = preset("hybrid", hidden_channels=8, num_repeats=2, epochs=5, patience=5)
    inspector = train_inspector(train, val, options, config, test=test, host=HOST, progress=False)
    assert inspector.targets == target_names() and inspector.labels == "v2"
    intervals = calibrate_intervals(inspector, calibration)
    assert intervals.names == target_names()
    cov = test_coverage(intervals, inspector, test)
    assert set(cov) == {*target_names(), "mean", "n"} and cov["n"] == 2
    inspector.info["intervals"] = intervals.to_dict()
    path = inspector.save(str(tmp_path / "v2"))
    state = torch.load(path, weights_only=True)
    assert state["labels"] == "v2" and state["units"]["memory_burst_amount"] == "MB"

    predictor = Predictor(load_inspector(path))
    profile = predictor.predict(mlp(16), (torch.randn(4, 8), torch.randint(0, 4, (4,))), name="mlp")
    step = profile.metrics["step_time"]
    assert list(profile.metrics) == list(target_names()) and step > 0 and profile.batch_size == 4
    assert profile.throughput == pytest.approx(2 * 4 / step)  # 2 workers x batch 4 / step time
    low, high = profile.intervals["step_time"]  # (a biased tiny model: need not hold the value)
    assert 0 < low <= high
    t_low, t_high = profile.throughput_interval
    assert (t_low, t_high) == (pytest.approx(8 / high), pytest.approx(8 / low))

    doc = json.loads(json.dumps(profile.to_dict()))
    assert doc["schema"] == "driple-profile/2" and doc["units"]["step_time"] == "s"
    assert doc["units"]["memory_burst_amount"] == "MB" and doc["workers"] == 2 and doc["batch_size"] == 4
    assert doc["throughput"]["samples_per_s"] == pytest.approx(profile.throughput)
    assert doc["throughput"]["interval"] == pytest.approx(list(profile.throughput_interval))
    text = format_profile(profile, predictor.describe())
    lines = text.splitlines()
    assert any(line.startswith("step time") and " s [" in line for line in lines)  # the table rows
    assert any(line.startswith("throughput ") and " samples/s [" in line for line in lines)
    assert "throughput" in profile.describe() and "a step takes" in profile.summary()
    assert " MB (peak allocated; peak level" in profile.describe()  # memory: a level in MB

    # bounds: a memory amount in MB is capped by the trained-on host's memory (8 GB)
    values = np.array([profile.metrics[m] for m in target_names()])[None, :]
    values[0, 3] = 1e6
    clipped, notes = bound(values, SETTING, host_memory_mb=HOST.memory_mb)
    assert clipped[0, 3] == 8000 and any("clipped to 8000" in n for n in notes[0])
    assert slot_capacity(SETTING, host_memory_mb=8000)["memory"] == 4000  # 2 workers share the host

    assert main(["predict", "mlp", "--set", "hidden=32", "--batch-size", "4", "--setting", path,
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["throughput"]["samples_per_s"] == pytest.approx(8 / out["metrics"]["step_time"])
    assert out["inspector"]["configuration"] == "hybrid" and out["inspector"]["labels"] == "v2"
    assert out["inspector"]["networks"] == preset("hybrid")[0].networks  # the preset's average
    assert main(["predict", "mlp", "--set", "hidden=32", "--batch-size", "4", "--setting", path]) == 0
    assert "throughput" in capsys.readouterr().out

    # a v1 checkpoint (12 targets, memory in %) is refused, naming the versions
    monkeypatch.setenv("DRIPLE_MODELS", str(v1_models_root))
    with pytest.raises(DripleError, match=r"trained on labels v1 \(12 targets, memory burst amount "
                                          r"in % of host memory, no step time\) but driple declares labels v2"):
        Predictor.load(SETTING)
    assert main(["predict", "mlp", "--setting", SETTING]) == 2
    assert "labels v1" in capsys.readouterr().err
    use_labels("v1")  # and the other way round
    with pytest.raises(DripleError, match="trained on labels v2 .* but driple declares labels v1"):
        load_inspector(path)
    use_labels("v2")


def test_datasets_of_the_other_labels_are_refused(labels_v2, tmp_path, write_dataset, fake_builder):
    from driple.inspector.dataset import InspectorDataset

    root = write_dataset(tmp_path / "v1" / SETTING, labels="v1")  # no labels column: the v1 tables
    with pytest.raises(DripleError, match="holds labels v1 but driple declares labels v2"):
        InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)
    v2 = InspectorDataset(write_dataset(tmp_path / "v2" / SETTING, labels="v2"), builder=fake_builder,
                          builder_id="fake", progress=False)
    assert v2.target_names[-1] == "step_time" and v2.targets.shape[1] == 13
    use_labels("v1")
    with pytest.raises(DripleError, match="holds labels v2 but driple declares labels v1"):
        InspectorDataset(write_dataset(tmp_path / "again" / SETTING, labels="v2"), builder=fake_builder,
                         builder_id="fake", progress=False)
    use_labels("v2")


def test_analytic_step_time_by_hand(labels_v2, tmp_path, write_dataset, fake_builder):
    from driple.graph.summary_features import priors
    from driple.inspector.analytic import AnalyticStepTime
    from driple.inspector.dataset import InspectorDataset

    ds = InspectorDataset(write_dataset(tmp_path / SETTING, labels="v2"), builder=fake_builder,
                          builder_id="fake", progress=False)
    graphs = [ds[i] for i in range(len(ds))]
    bare = AnalyticStepTime(host=HOST).fit(ds)
    f = ds.graph_features
    col = {k: f[:, i] for i, k in enumerate(__import__("driple.graph.summary_features",
                                                       fromlist=["GRAPH_FEATURES"]).GRAPH_FEATURES)}
    by_hand = (col["gflops"] * 1e9 / 1e9 + col["traffic_mb"] * 1e6 / 1e10
               + np.maximum(col["comm_tx_mb"], col["comm_rx_mb"]) * 1e6 / HOST.loopback_bytes_per_s)
    assert bare.predict(graphs)[:, 0] == pytest.approx(by_hand)
    assert bare.predict(graphs)[:, 0] == pytest.approx(priors(f, SETTING, HOST)["prior_step_s"])
    assert bare.targets_ == ("step_time",) and bare.factor_ == 1.0
    cal = AnalyticStepTime(calibrated=True, host=HOST).fit(ds)
    measured = ds.targets[:, -1]
    assert cal.factor_ == pytest.approx(np.median(measured / by_hand))
    use_labels("v1")
    with pytest.raises(DripleError, match="no step_time"):
        AnalyticStepTime(calibrated=True, host=HOST).fit(graphs)
    use_labels("v2")


def test_analytic_estimator_scores_step_time_only(labels_v2, tmp_path, write_dataset, fake_builder,
                                                  monkeypatch):
    """``analytic`` in the evaluation harness: step time scored against the measured one, the 12
    metrics left unscored ("-"), and a labels v1 dataset refused by name."""
    from driple.hardware.host_speed import environment_host_speed
    from driple.inspector.analytic import AnalyticStepTime
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.estimator_registry import make_estimator
    from driple.inspector.evaluate import format_table, run_folds
    from driple.inspector.scores import mape
    from driple.inspector.splits import Split

    monkeypatch.setenv("DRIPLE_HOST_SPEED", "1e9,1e10")  # the dataset records no host figures
    ds = InspectorDataset(write_dataset(tmp_path / SETTING, labels="v2"), builder=fake_builder,
                          builder_id="fake", progress=False)
    n = len(ds)
    fold = Split("random", train=list(range(n // 2)), val=[], test=list(range(n // 2, n)))
    report = run_folds(ds, [fold], {name: (lambda f, name=name: make_estimator(name))
                                    for name in ("mean", "analytic")}, progress=False)
    scores = report["scores"]["analytic"]
    measured = ds.targets[fold.test, -1]
    by_hand = AnalyticStepTime(calibrated=True, host=environment_host_speed()).fit(
        [ds[i] for i in fold.train], measured=ds.targets[fold.train, -1]).predict([ds[i] for i in fold.test])
    assert scores["step_time"]["mape"] == pytest.approx(mape(measured, by_hand[:, 0])[0])
    assert all(scores[t]["nrmse"] is None for t in ds.target_names[:-1])
    assert report["scores"]["mean"][ds.target_names[0]]["nrmse"] is not None
    assert report["wins"]["mape"]["analytic"] <= 1
    assert any(" - " in line or line.rstrip().endswith("-") for line in format_table(report))
    use_labels("v1")
    try:
        v1 = InspectorDataset(write_dataset(tmp_path / "v1" / SETTING), builder=fake_builder,
                              builder_id="fake", progress=False)
        with pytest.raises(DripleError, match="predicts step_time.*labels v1"):
            make_estimator("analytic").fit(v1, list(range(4)), [])
    finally:
        use_labels("v2")
