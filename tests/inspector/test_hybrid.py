"""The hybrid inspector, the features-only MLP and residuals over priors: shapes, invariances,
hand-checked scaling, training, selection on validation, checkpoints, transfer."""
import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.graph.summary_features import GRAPH_FEATURES
from driple.inspector.checkpoint import TrainedInspector, load_inspector
from driple.inspector.graph_inputs import GraphInputs, stack_graph_features
from driple.inspector.model import FeatureMLP, GraphBatch, Inspector, build_model
from driple.inspector.scaling import TargetScaler
from driple.inspector.splits import random_split
from driple.inspector.train import (InspectorConfig, preset, retrain_config,
                                    select_inspector, train_inspector)
from driple.metrics import target_names

N_TARGETS = len(target_names())  # the declared targets (labels v2: the 12 metrics and the step time)

HOST = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
TINY = dict(hidden_channels=8, num_repeats=2, epochs=4, patience=4)


def test_hybrid_shape_contract_and_node_order_invariance(tiny_graph):
    """Graphs with features in, [n, targets] out; permuting the groups changes nothing."""
    graphs = [tiny_graph(n, seed=n) for n in (4, 7, 10)]
    inputs = GraphInputs(GRAPH_FEATURES, ("prior_step_s", "link_mb_s"), "cpu-ddp-w2-1g", HOST).fit(
        stack_graph_features(graphs))
    attr = inputs.transform(stack_graph_features(graphs))
    assert attr.shape == (3, len(GRAPH_FEATURES) + 2) and attr.dtype == torch.float32
    torch.manual_seed(0)
    model = Inspector(3, hidden_channels=16, num_repeats=3, out_channels=13,
                      graph_channels=len(inputs)).eval()
    for g, a in zip(graphs, attr):
        g.graph_attr = a.view(1, -1)
    out = model.forward_batch(GraphBatch.from_graphs(graphs))
    assert out.shape == (3, 13)

    g = graphs[1]
    perm = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(1))
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(g.num_nodes)
    shuffled = g.clone()
    shuffled.x, shuffled.edge_index = g.x[perm], inverse[g.edge_index]
    one = model(g.x, g.edge_index, g.edge_weight, graph_attr=g.graph_attr)
    again = model(shuffled.x, shuffled.edge_index, shuffled.edge_weight, graph_attr=g.graph_attr)
    assert torch.allclose(one, again, atol=1e-5) and torch.allclose(one, out[1:2], atol=1e-5)
    with pytest.raises(ValueError, match="graph_attr of shape"):
        model(g.x, g.edge_index, g.edge_weight)  # a hybrid needs its graph-level inputs


def test_features_only_mlp_reads_nothing_of_the_graph(tiny_graph):
    torch.manual_seed(0)
    mlp = FeatureMLP(5, hidden_channels=8, out_channels=N_TARGETS).eval()
    attr = torch.randn(2, 5)
    g = tiny_graph(6)
    assert mlp(g.x, g.edge_index, graph_attr=attr).shape == (2, N_TARGETS)
    assert torch.equal(mlp(None, None, graph_attr=attr), mlp(g.x * 7, g.edge_index, graph_attr=attr))
    rebuilt = build_model(mlp.config())
    assert isinstance(rebuilt, FeatureMLP) and rebuilt.config() == mlp.config()
    assert isinstance(build_model(Inspector(3, num_repeats=1).config()), Inspector)


def test_residual_target_scaling_by_hand():
    """ln scaling: z = (ln(y + eps) - ln(prior + prior_eps) - centre) / scale, eps and prior_eps
    1 % of the target's and the prior's median."""
    y = np.array([[1.0, 10.0], [3.0, 20.0], [5.0, 40.0]])
    prior = np.array([[2.0, np.nan], [2.0, np.nan], [4.0, np.nan]])  # column 2 has no prior
    ts = TargetScaler("ln").fit(y, prior)
    assert ts.eps_ == pytest.approx([0.03, 0.2]) and ts.prior_eps_[0] == pytest.approx(0.02)
    r = np.log(y[:, 0] + 0.03) - np.log(prior[:, 0] + 0.02)
    assert ts.center_[0] == pytest.approx(r.mean()) and ts.scale_[0] == pytest.approx(r.std())
    assert ts.center_[1] == pytest.approx(np.log(y[:, 1] + 0.2).mean())
    z = ts.transform(y, prior)
    assert np.allclose(ts.inverse_transform(z, prior), y)
    # an output of 0 is the mean residual: the prior times exp(centre)
    back = ts.inverse_transform(np.zeros((1, 2)), np.array([[8.0, np.nan]]))
    assert back[0, 0] == pytest.approx((8.0 + 0.02) * np.exp(r.mean()) - 0.03)
    again = TargetScaler.from_dict(ts.to_dict())
    assert again.eps_ == ts.eps_ and again.prior_eps_ == ts.prior_eps_
    # a target that is 3x its prior is a constant residual ln 3, at any size
    three = TargetScaler("ln").fit(3 * prior[:, :1], prior[:, :1])
    assert three.transform(np.array([[300.0]]), np.array([[100.0]]))[0, 0] == pytest.approx(
        three.transform(3 * prior[:1, :1], prior[:1, :1])[0, 0])
    # a checkpoint from before prior_eps was recorded keeps its own floor (eps)
    old = ts.to_dict()
    old.pop("prior_eps")
    assert TargetScaler.from_dict(old).bases(np.array([[2.0, np.nan]]))[0, 0] == pytest.approx(np.log(2.03))
    with pytest.raises(DripleError, match="need the 'ln' target scaling"):
        TargetScaler("max").fit(y, prior)


@pytest.mark.parametrize("name", ["gnn", "hybrid", "hybrid-plain", "features"])
def test_each_configuration_trains_saves_and_loads(dataset, name, tmp_path):
    split = random_split(dataset)
    config, options = preset(name, **TINY)
    model = train_inspector(dataset[split.train], dataset[split.val], options, config,
                            test=dataset[split.test], host=HOST, progress=False)
    graphs = [dataset[i] for i in split.test]
    pred = model.predict(graphs)
    assert pred.shape == (len(graphs), N_TARGETS) and np.isfinite(pred).all()
    assert model.configuration == {"hybrid-plain": "hybrid"}.get(name, name)
    assert model.residual == (name in ("hybrid", "features"))
    assert model.info["configuration"]["kind"] == config.kind and set(model.info["scores"]) == {"val", "test"}
    assert model.info["split"]["test"] == [dataset.job_ids[i] for i in split.test]
    loaded = load_inspector(model.save(str(tmp_path / name)))
    assert np.allclose(loaded.predict(graphs), pred, rtol=1e-5, atol=1e-6)
    if name != "gnn":  # the host figures the priors divide by travel with the checkpoint
        assert loaded.host == HOST and loaded.graph_inputs.setting == "cpu-ddp-w2-lo"
    assert retrain_config(loaded)[0] == config
    from driple.shipping.ship import model_card

    card = model_card(loaded, "cpu-ddp-w2-lo", "test", "test", "pytest")
    words = {"gnn": "paper GNN: GCN 3->8", "hybrid": "hybrid: GCN 3->8", "hybrid-plain": "hybrid: GCN",
             "features": "features only: MLP on 23 graph-level inputs"}[name]
    assert words in card and (("predicts residuals over the priors" in card) == loaded.residual)


def test_residual_predictions_are_prior_times_a_factor(dataset):
    split = random_split(dataset)
    config, options = preset("hybrid", **TINY)
    model = train_inspector(dataset[split.train], dataset[split.val], options, config, host=HOST,
                            progress=False)
    graphs = [dataset[i] for i in split.test]
    prior = model.priors(graphs)
    names = list(model.targets)
    assert np.isnan(prior[:, names.index("compute_burst_amount")]).all()  # declares no prior
    link = prior[:, names.index("tx_burst_amount")]
    assert np.allclose(link, HOST.loopback_bytes_per_s / 1e6)  # loopback: the measured constant
    scaled = model.predict_scaled(model.prepare(graphs))
    ts = model.target_scaler
    j = names.index("tx_burst_duration")
    expected = (prior[:, j] + ts.prior_eps_[j]) * np.exp(scaled[:, j] * ts.scale_[j] + ts.center_[j]) - ts.eps_[j]
    assert model.predict(graphs)[:, j] == pytest.approx(expected, rel=1e-5)


def test_choices_are_made_on_validation_only(dataset):
    split = random_split(dataset)
    candidates = {n: preset(n, **TINY) for n in ("features", "hybrid-plain")}
    best = select_inspector(dataset[split.train], dataset[split.val], candidates,
                            test=dataset[split.test], host=HOST)
    sel = best.info["selection"]
    assert set(sel["candidates"]) == set(candidates) and sel["chosen"] == min(sel["candidates"],
                                                                               key=sel["candidates"].get)
    assert best.info["scores"]["val"]["mean"]["mape"] == sel["candidates"][sel["chosen"]]
    with pytest.raises(DripleError, match="needs validation jobs"):
        select_inspector(dataset[split.train], [], candidates, host=HOST)


def test_estimator_interface(dataset):
    split = random_split(dataset)
    from driple.inspector.estimators import GNNEstimator

    config, options = preset("features", **TINY)
    est = GNNEstimator(options=options, config=config, host=HOST).fit(dataset, split.train, split.val)
    assert est.predict(dataset, split.test).shape == (len(split.test), N_TARGETS)
    assert est.inspector_.targets == tuple(dataset.target_names) and est.inspector_.configuration == "features"
    with pytest.raises(DripleError, match="target_scaling='ln'"):
        train_inspector(dataset[split.train], None, preset("gnn")[1], InspectorConfig(kind="hybrid"), host=HOST)


@pytest.mark.parametrize("name", ["hybrid", "features", "gnn"])
def test_a_fold_retrains_the_checkpoint_configuration(dataset, name):
    """Leave-family-out folds and the design study retrain *this* network (its recorded
    configuration, options and host figures), not the paper's GNN of the same sizes."""
    from driple.inspector.estimators import GNNEstimator

    split = random_split(dataset)
    config, options = preset(name, **TINY)
    shipped = train_inspector(dataset[split.train], dataset[split.val], options, config, host=HOST,
                              progress=False)
    fold = GNNEstimator.from_checkpoint(shipped, overrides={"epochs": 2}).fit(dataset, split.train, split.val)
    again = fold.inspector_
    assert again.configuration == shipped.configuration and again.residual == shipped.residual
    assert again.info["configuration"] == shipped.info["configuration"]
    assert again.info["training"]["epochs"] == 2 and again.info["training"]["target_scaling"] == options.target_scaling
    if name != "gnn":
        assert again.host == HOST


def test_the_older_call_still_trains_the_paper_model(dataset):
    model = train_inspector(dataset, random_split(dataset), hidden_channels=8, num_repeats=2,
                            graph_attr=True, options=preset("gnn", epochs=2)[1], progress=False)
    assert model.configuration == "gnn" and model.model.graph_channels == 6 and model.graph_inputs is None
    assert model.info["split"]["kind"] == "random"


def test_transfer_of_a_hybrid_and_of_the_features_mlp(dataset, tmp_path, write_dataset, fake_builder):
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.transfer import finetune

    root = write_dataset(tmp_path / "cpu-ddp-w2-1g", setting="cpu-ddp-w2-1g")
    target = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)
    split = random_split(dataset)
    for name, scheme in (("hybrid", "paper"), ("features", "mlp")):
        config, options = preset(name, **TINY)
        source = train_inspector(dataset[split.train], dataset[split.val], options, config, host=HOST,
                                 progress=False)
        tuned = finetune(source, target, scheme=scheme, options=options, progress=False)
        assert tuned.graph_inputs.setting == "cpu-ddp-w2-1g" and tuned.setting == "cpu-ddp-w2-1g"
        assert tuned.residual and tuned.host == HOST
        link = tuned.priors([target[0]])[0, list(tuned.targets).index("tx_burst_amount")]
        assert link == pytest.approx(125.0)  # 1 Gbit/s
        assert np.isfinite(tuned.predict([target[i] for i in range(3)])).all()
    with pytest.raises(DripleError, match="no graph layers"):
        finetune(source, target, scheme="paper", options=options, progress=False)


def test_which_host_figures_an_inspector_records(dataset, monkeypatch, tmp_path):
    """Given figures first, then the dataset's provenance, then $DRIPLE_HOST_SPEED; measuring
    here is refused when the jobs were measured on another CPU model."""
    import json
    from types import SimpleNamespace

    import pandas as pd

    import driple.hardware.host_speed as host_speed
    from driple.inspector.train import training_host

    assert training_host(dataset, HOST) is HOST
    monkeypatch.setenv("DRIPLE_HOST_SPEED", "2e9,3e9")
    given = training_host(dataset)
    assert (given.flops_per_s, given.memory_bytes_per_s) == (2e9, 3e9)
    recorded = {**HOST.to_dict(), "flops_per_s": 5e9}
    (tmp_path / "provenance.json").write_text(json.dumps({"host_speed": recorded}))
    assert training_host(SimpleNamespace(root=str(tmp_path))).flops_per_s == 5e9
    monkeypatch.delenv("DRIPLE_HOST_SPEED")
    monkeypatch.setattr(host_speed, "cpu_model", lambda: "Intel Xeon")
    elsewhere = SimpleNamespace(root=None, frame=pd.DataFrame({"cpu_model": ["AMD EPYC", "AMD EPYC"]}))
    with pytest.raises(DripleError, match="measured on AMD EPYC but this host is Intel Xeon"):
        training_host(elsewhere)
    with pytest.raises(DripleError, match="flops_per_s,memory_bytes_per_s"):
        monkeypatch.setenv("DRIPLE_HOST_SPEED", "fast")
        training_host(dataset)


def test_a_target_on_other_hardware_gets_its_own_host_figures(dataset, tmp_path, write_dataset, fake_builder):
    """Transfer to a target measured on another CPU model: its priors divide by the target
    host's figures (its provenance), or the transfer is refused when it has none."""
    import json
    from pathlib import Path

    import pandas as pd

    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.transfer import finetune

    config, options = preset("hybrid", **TINY)
    split = random_split(dataset)
    source = train_inspector(dataset[split.train], dataset[split.val], options, config, host=HOST,
                             progress=False)
    root = Path(write_dataset(tmp_path / "cpu-ps-p1w2-1g", setting="cpu-ps-p1w2-1g"))
    table = pd.read_csv(root / "results.csv")
    table["cpu_model"] = "Other CPU"
    table.to_csv(root / "results.csv", index=False)
    target = InspectorDataset(str(root), builder=fake_builder, builder_id="fake", progress=False)
    with pytest.raises(DripleError, match="measured on Other CPU, the source's priors use figures of"):
        finetune(source, target, options=options, progress=False)

    other = {**HOST.to_dict(), "flops_per_s": HOST.flops_per_s / 2, "cpu_model": "Other CPU"}
    (root / "provenance.json").write_text(json.dumps({"host_speed": other}))
    target = InspectorDataset(str(root), builder=fake_builder, builder_id="fake", progress=False)
    tuned = finetune(source, target, options=options, progress=False)
    assert tuned.host.cpu_model == "Other CPU" and source.host == HOST
    step = list(tuned.targets).index("step_time")
    on_source_host = source.graph_inputs.for_setting("cpu-ps-p1w2-1g").target_priors(
        stack_graph_features([target[0]]), source.target_priors)
    assert tuned.priors([target[0]])[0, step] > on_source_host[0, step]  # half the FLOP/s: a longer step
