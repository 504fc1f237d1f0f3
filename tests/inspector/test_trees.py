"""The tree member of an ensemble checkpoint: the geometric mean with the network, a round trip
through the checkpoint, refusal of anything but scikit-learn's trees, and folds that retrain it."""
import numpy as np
import pytest

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.inspector.checkpoint import load_inspector
from driple.inspector.splits import random_split
from driple.inspector.train import preset, train_inspector
from driple.inspector.ensemble import with_trees
from driple.inspector.trees import TreeMember, geometric_mean

HOST = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
TINY = dict(hidden_channels=8, num_repeats=2, epochs=3, patience=3)


@pytest.fixture
def hybrid(dataset):
    split = random_split(dataset)
    config, options = preset("hybrid", **TINY)
    return train_inspector(dataset[split.train], dataset[split.val], options, config, host=HOST,
                           progress=False), split


def test_geometric_mean_by_hand():
    a, b = np.array([[1.0, 4.0, np.nan]]), np.array([[4.0, 9.0, 2.0]])
    assert geometric_mean(a, b) == pytest.approx(np.array([[2.0, 6.0, 2.0]]))


def test_an_inspector_with_trees_predicts_the_geometric_mean_and_keeps_it_in_its_checkpoint(
        dataset, hybrid, tmp_path):
    model, split = hybrid
    graphs = [dataset[i] for i in split.test]
    network = model.predict(graphs)
    both = with_trees(model, dataset, split)
    assert model.trees is None and both.trees is not None  # the original is left as it was
    trees = both.trees.predict(graphs)
    assert both.predict(graphs) == pytest.approx(np.sqrt(network * trees), rel=1e-9)
    assert set(both.info["scores"]) == {"val", "test"} and both.configuration_name == "hybrid+trees"
    loaded = load_inspector(both.save(str(tmp_path / "ensemble")))
    assert np.array_equal(loaded.predict(graphs), both.predict(graphs))
    assert isinstance(loaded.trees, TreeMember) and loaded.trees.targets == model.targets


def test_a_tree_member_holding_other_types_is_refused(dataset, hybrid):
    import skops.io as sio
    from sklearn.linear_model import LinearRegression

    model, split = hybrid
    state = with_trees(model, dataset, split).trees.to_state()
    state["regressors"] = sio.dumps([LinearRegression().fit(np.ones((3, 1)), np.ones(3))])
    with pytest.raises(DripleError, match="should hold .* HistGradientBoostingRegressor, not LinearRegression"):
        TreeMember.from_state(state)
    import fractions

    state["regressors"] = sio.dumps([fractions.Fraction(1, 3)])  # a type skops itself does not trust
    with pytest.raises(DripleError, match="types driple does not load: fractions.Fraction"):
        TreeMember.from_state(state)
    state["regressors"] = b"not a zip"
    with pytest.raises(DripleError, match="tree member is damaged"):
        TreeMember.from_state(state)


def test_a_member_of_another_setting_or_targets_is_refused(dataset, hybrid):
    model, split = hybrid
    member = with_trees(model, dataset, split).trees
    other = TreeMember(member.inputs.for_setting("cpu-ddp-w2-1g"), member.targets, member.target_priors,
                       member.prior_eps, member.eps, member.models)
    with pytest.raises(DripleError, match="fitted for cpu-ddp-w2-1g"):
        model.attach_trees(other)
    fewer = TreeMember(member.inputs, member.targets[:-1], member.target_priors[:-1], member.prior_eps[:-1],
                       member.eps[:-1], member.models[:-1])
    with pytest.raises(DripleError, match="the tree member predicts"):
        model.attach_trees(fewer)


def test_family_folds_retrain_the_network_and_the_trees(dataset, hybrid):
    from driple.inspector.estimators import EnsembleEstimator
    from driple.inspector.evaluate import _inspector_factory, evaluate

    model, split = hybrid
    both = with_trees(model, dataset, split)
    make = _inspector_factory(both, dataset, None, None, 0, None, None, False, None)
    fold_estimator = make(random_split(dataset))
    assert isinstance(fold_estimator, EnsembleEstimator)
    assert [m.name for m in fold_estimator.members] == ["inspector", "hgb-priors"]
    report = evaluate(both, dataset, split="family", baselines=["mean"], families=["alpha"],
                      overrides={"epochs": 2}, progress=False)
    assert report["estimators"] == ["inspector", "mean"] and report["n_test"] > 0


def test_finetuning_an_ensemble_fits_trees_for_the_target(hybrid, dataset, tmp_path, write_dataset,
                                                          fake_builder, monkeypatch, capsys):
    import driple.inspector.dataset as dataset_module
    from driple.cli import main

    monkeypatch.setattr(dataset_module, "zoo_graph", fake_builder)
    monkeypatch.setattr(dataset_module, "_zoo_builder_id", lambda: "fake")
    model, split = hybrid
    source = with_trees(model, dataset, split).save(str(tmp_path / "source"))
    target = write_dataset(tmp_path / "cpu-ddp-w2-1g", n_configs=12, setting="cpu-ddp-w2-1g")
    assert main(["finetune", "--from", source, "--dataset", target, "--out", str(tmp_path / "tuned"),
                 "--epochs", "2", "--quiet"]) == 0
    tuned = load_inspector(str(tmp_path / "tuned"))
    assert tuned.trees is not None and tuned.trees.inputs.setting == "cpu-ddp-w2-1g"
    assert tuned.info["transfer"]["from_setting"] == "cpu-ddp-w2-lo" and "test" in tuned.info["scores"]
    capsys.readouterr()
