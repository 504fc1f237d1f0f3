"""Several networks of one configuration, trained alone, averaged (InspectorConfig.networks)."""
import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.inspector.model import FeatureMLP, Inspector, NetworkEnsemble, build_model, members_of
from driple.inspector.train import InspectorConfig, preset, train_inspector

HOST = HostSpeed(flops_per_s=1e10, memory_bytes_per_s=1e10, memory_bytes=4e9)  # fixed: not measured per run


def test_ensemble_output_is_the_mean_of_its_members(tiny_graph):
    from driple.inspector.model import GraphBatch

    torch.manual_seed(0)
    members = [Inspector(3, hidden_channels=8, num_repeats=2) for _ in range(3)]
    ensemble = NetworkEnsemble(members).eval()
    batch = GraphBatch.from_graphs([_prepared(tiny_graph(5, seed=1)), _prepared(tiny_graph(6, seed=2))])
    with torch.no_grad():
        each = [m.forward_batch(batch) for m in members]
        assert torch.allclose(ensemble.forward_batch(batch), sum(each) / 3, atol=1e-6)
    assert (ensemble.in_channels, ensemble.out_channels, ensemble.num_repeats) == (3, members[0].out_channels, 2)
    assert members_of(ensemble) == members and members_of(members[0]) == [members[0]]


def _prepared(g):
    from torch_geometric.data import Data

    from driple.inspector.model import gcn_edges, is_symmetric

    index, weight = gcn_edges(g.edge_index, g.edge_weight, g.num_nodes, g.x.dtype)
    return Data(x=g.x, edge_index=g.edge_index, edge_weight=g.edge_weight, gcn_index=index,
                gcn_weight=weight, gcn_symmetric=is_symmetric(index, weight, g.num_nodes),
                num_nodes=g.num_nodes)


def test_ensemble_config_rebuilds_it_and_refuses_mixed_members():
    ensemble = NetworkEnsemble([FeatureMLP(4, hidden_channels=8) for _ in range(2)])
    rebuilt = build_model(ensemble.config())
    assert isinstance(rebuilt, NetworkEnsemble) and len(rebuilt.members) == 2
    rebuilt.load_state_dict(ensemble.state_dict())
    assert rebuilt.reads_graph is False and rebuilt.graph_channels == 4
    with pytest.raises(ValueError, match="same configuration"):
        NetworkEnsemble([FeatureMLP(4, hidden_channels=8), FeatureMLP(4, hidden_channels=16)])
    with pytest.raises(ValueError, match="at least two"):
        NetworkEnsemble([FeatureMLP(4)])
    with pytest.raises(DripleError, match="networks must be"):
        InspectorConfig(networks=0)


def test_networks_train_alone_with_successive_seeds_and_round_trip(tmp_path, dataset):
    """networks=2: member i is exactly the single network trained with seed + i; the checkpoint
    predicts the geometric mean of the two single networks' predictions."""
    from dataclasses import replace

    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.splits import random_split

    split = random_split(dataset)
    train, val = dataset[split.train], dataset[split.val]
    config, options = preset("hybrid", hidden_channels=8, num_repeats=2, epochs=3, patience=3, seed=4,
                             networks=1)
    singles = [train_inspector(train, val, replace(options, seed=s), config, host=HOST, progress=False)
               for s in (4, 5)]
    pair = train_inspector(train, val, options, replace(config, networks=2), host=HOST, progress=False)
    assert isinstance(pair.model, NetworkEnsemble) and pair.networks == 2 and singles[0].networks == 1
    for single, member in zip(singles, pair.model.members):
        for k, v in single.model.state_dict().items():
            assert torch.equal(member.state_dict()[k], v), k
    graphs = [dataset[i] for i in split.test]
    expected = np.exp((np.log(singles[0].predict(graphs)) + np.log(singles[1].predict(graphs))) / 2)
    assert np.allclose(pair.predict(graphs), expected, rtol=1e-4)  # float32 outputs averaged
    history = pair.info["history"]
    assert len(history["networks"]) == 2 and history["networks"][1] == singles[1].info["history"] | {
        "seconds": history["networks"][1]["seconds"]}
    pair.save(str(tmp_path / "pair"))
    loaded = load_inspector(str(tmp_path / "pair"))
    assert isinstance(loaded.model, NetworkEnsemble)
    assert np.array_equal(loaded.predict(graphs), pair.predict(graphs))
    assert loaded.info["configuration"]["networks"] == 2


@pytest.mark.parametrize("scheme", ["paper", "mlp", "scratch"])
def test_an_ensemble_fine_tunes_each_member(dataset, scheme):
    """Fine-tuning an ensemble tunes each member on its own, as training did; the frozen parts of
    every member keep the source's weights."""
    from dataclasses import replace

    from driple.inspector.splits import random_split
    from driple.inspector.transfer import finetune

    split = random_split(dataset)
    config, options = preset("hybrid", hidden_channels=8, num_repeats=2, epochs=2, patience=2)
    source = train_inspector(dataset[split.train], dataset[split.val], options, replace(config, networks=2),
                             host=HOST, progress=False)
    tuned = finetune(source, dataset, scheme=scheme, options=replace(options, ema=0.0), progress=False)
    history = tuned.info["history"]
    assert isinstance(tuned.model, NetworkEnsemble) and len(history["networks"]) == 2
    assert history["seconds"] == sum(h["seconds"] for h in history["networks"])  # as training records it
    for before, after in zip(source.model.members, tuned.model.members):
        changed = {k for k, v in after.state_dict().items()
                   if k not in before.state_dict() or not torch.equal(v, before.state_dict()[k])}
        if scheme == "scratch":
            assert "conv_first.bias" in changed
        else:
            assert changed and all(k.startswith(("mlp", "conv_repeat_tuned")) for k in changed), changed
    assert np.isfinite(tuned.predict(dataset[0])).all()


def test_the_hybrid_preset_averages_its_chosen_number_of_networks():
    from driple.inspector.train import HYBRID_NETWORKS

    assert preset("hybrid")[0].networks == HYBRID_NETWORKS > 1
    assert preset("gnn")[0].networks == preset("features")[0].networks == 1
    assert preset("hybrid", networks=1)[0].networks == 1
