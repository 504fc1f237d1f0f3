import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.inspector.model import Inspector
from driple.inspector.checkpoint import TrainedInspector, load_inspector
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.metrics import target_names

N_TARGETS = len(target_names())  # the declared targets (labels v2: the 12 metrics and the step time)


@pytest.fixture
def make_predictor(tiny_graph):
    """Function ``(split=False) -> (TrainedInspector, graphs)``: a small untrained inspector."""
    return lambda split=False: _predictor(tiny_graph, split)


def _predictor(tiny_graph, split):
    torch.manual_seed(0)
    graphs = [tiny_graph(4 + i, seed=i) for i in range(5)]
    model = Inspector(3, hidden_channels=16, num_repeats=4)
    if split:
        model.split_repeats()
        with torch.no_grad():
            model.conv_repeat_tuned.bias.add_(0.5)
    fs = FeatureScaler(["op_freq", "tensor_mb", "n_ops"]).fit(graphs)
    ts = TargetScaler("max").fit(np.arange(1, 2 * N_TARGETS + 1, dtype=float).reshape(2, N_TARGETS))
    info = {"feature_set": "driple", "vocab_digest": "test-vocab", "setting": "cpu-ddp-w2-lo",
            "split": {"kind": "random", "train": ["j1"], "val": [], "test": ["j2"]}}
    return TrainedInspector(model, fs, ts, info), graphs


@pytest.mark.parametrize("split", [False, True])
def test_checkpoint_round_trip(make_predictor, tmp_path, split):
    predictor, graphs = make_predictor(split)
    path = predictor.save(str(tmp_path / "trained"))
    assert path.endswith("trained/inspector.pt")
    state = torch.load(path, weights_only=True)  # plain types and tensors only
    assert state["config"]["tuned_from"] == (2 if split else None)
    loaded = load_inspector(str(tmp_path / "trained"))
    assert np.array_equal(loaded.predict(graphs), predictor.predict(graphs))
    assert loaded.setting == "cpu-ddp-w2-lo" and loaded.info["split"]["test"] == ["j2"]
    assert loaded.predict(graphs[0]).shape == (1, N_TARGETS)
    assert list(loaded.predict_frame(graphs).columns)[0] == "compute_burst_amount"


def test_checkpoint_of_other_version_is_refused(make_predictor, tmp_path):
    predictor, _ = make_predictor()
    state = predictor.state()
    state["driple_version"] = "0.0.1"
    torch.save(state, tmp_path / "old.pt")
    with pytest.raises(DripleError, match="driple 0.0.1"):
        load_inspector(str(tmp_path / "old.pt"))


def test_checkpoint_damaged_or_foreign(make_predictor, tmp_path):
    predictor, _ = make_predictor()
    state = predictor.state()
    state["config"]["hidden_channels"] = 8  # layer sizes no longer match the weights
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(DripleError, match="damaged"):
        load_inspector(str(tmp_path / "bad.pt"))
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    with pytest.raises(DripleError, match="not a driple inspector checkpoint"):
        load_inspector(str(tmp_path / "foreign.pt"))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(DripleError):
        load_inspector(str(tmp_path / "junk.pt"))
    with pytest.raises(DripleError, match="no inspector checkpoint"):
        load_inspector(str(tmp_path / "missing"))


def test_feature_set_and_vocabulary_mismatch(make_predictor, tiny_graph, tmp_path):
    predictor, _ = make_predictor()
    predictor.save(str(tmp_path / "m"))
    loaded = load_inspector(str(tmp_path / "m"))
    with pytest.raises(DripleError, match="'rich' feature set"):
        loaded.predict(tiny_graph(5, num_features=10, feature_set="rich"))
    with pytest.raises(DripleError, match="op vocabulary"):
        loaded.predict(tiny_graph(5, vocab_digest="other"))
    with pytest.raises(DripleError, match="features per group"):  # no feature_set recorded
        g = tiny_graph(5, num_features=10)
        del g.feature_set
        loaded.predict(g)
    with pytest.raises(DripleError, match="feature set"):
        load_inspector(str(tmp_path / "m"), feature_set="rich")


def test_build_options_record_the_grouping_seed(make_predictor):
    predictor, _ = make_predictor()
    # checkpoints saved before the seed was recorded (driple 0.1.0, every shipped one) were
    # grouped with seed 42, the default of that time
    predictor.info["builder"] = {"groups": 6, "grouping": "uniform", "features": "driple"}
    assert predictor.build_options() == {"groups": 6, "grouping": "uniform", "features": "driple",
                                         "seed": 42}
    predictor.info["builder"]["seed"] = 7
    assert predictor.build_options()["seed"] == 7


def test_graphs_grouped_otherwise_are_refused(make_predictor, tmp_path):
    pytest.importorskip("driple.zoo")
    from driple.graph.build import build_zoo_input
    from driple.graph.features import default_vocabulary

    predictor, _ = make_predictor()
    predictor.info.update(vocab_digest=default_vocabulary().digest,
                          builder={"groups": 6, "grouping": "uniform", "features": "driple", "seed": 7})
    predictor.save(str(tmp_path / "m"))
    loaded = load_inspector(str(tmp_path / "m"))
    knobs = {"batch_size": 4, "input_dim": 8, "hidden": 16, "layers": 1}
    own = build_zoo_input("mlp", strategy="cpu-ddp-w2-lo", **loaded.build_options(), **knobs)
    assert own.grouping_key == "uniform-M6-seed7"
    assert np.all(np.isfinite(loaded.predict(own)))
    default = build_zoo_input("mlp", strategy="cpu-ddp-w2-lo", groups=6, **knobs)
    with pytest.raises(DripleError, match=r"grouped as uniform-M6-seed42 .* seed=7"):
        loaded.predict(default)
    with pytest.raises(DripleError, match="grouped as uniform-M5-seed7"):
        loaded.predict(build_zoo_input("mlp", strategy="cpu-ddp-w2-lo", groups=5, seed=7, **knobs))
