import copy

import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.inspector.model import Inspector
from driple.inspector.train import TrainOptions
from driple.inspector.transfer import finetune, freeze_for_transfer, trainable_parameters
from driple.metrics import target_names

N_TARGETS = len(target_names())  # the declared targets (labels v2: the 12 metrics and the step time)


def _count(module):
    return sum(p.numel() for p in module.parameters())


def test_freezing_counts():
    model = Inspector(3, hidden_channels=16, num_repeats=6)
    mlp, conv = _count(model.mlp), _count(model.conv_repeat)
    assert mlp == (32 * 16 + 16) + (16 * 16 + 16) + (16 * N_TARGETS + N_TARGETS)
    assert conv == 16 * 16 + 16
    total = _count(model)

    paper = freeze_for_transfer(copy.deepcopy(model), "paper")
    assert paper.tuned_from == 3
    assert trainable_parameters(paper) == mlp + conv
    names = {n.split(".")[0] for n, p in paper.named_parameters() if p.requires_grad}
    assert names == {"mlp", "conv_repeat_tuned"}
    assert _count(paper) == total + conv

    only_mlp = freeze_for_transfer(copy.deepcopy(model), "mlp")
    assert trainable_parameters(only_mlp) == mlp
    assert only_mlp.conv_repeat_tuned is None

    scratch = freeze_for_transfer(copy.deepcopy(model), "scratch")
    assert trainable_parameters(scratch) == total
    with pytest.raises(DripleError):
        freeze_for_transfer(model, "all")


def test_finetune_paper_scheme_trains_only_its_part(dataset):
    from driple.inspector.splits import random_split
    from driple.inspector.train import train_inspector

    opts = TrainOptions(epochs=4, patience=4)
    source = train_inspector(dataset, random_split(dataset), hidden_channels=16, num_repeats=4,
                             options=opts, progress=False)
    before = copy.deepcopy(source.model.state_dict())
    tuned = finetune(source, dataset, fraction=0.5, scheme="paper", options=opts, progress=False)
    after = tuned.model.state_dict()
    assert torch.equal(source.model.state_dict()["conv_repeat.lin.weight"], before["conv_repeat.lin.weight"])
    for key, value in after.items():
        if key.startswith(("mlp", "conv_repeat_tuned")):
            continue
        assert torch.equal(value, before[key]), key  # frozen parts keep the source's weights
    assert not torch.equal(after["conv_repeat_tuned.lin.weight"], before["conv_repeat.lin.weight"])
    info = tuned.info["transfer"]
    assert info["scheme"] == "paper" and info["n_train"] == 3  # half of the 6 training jobs of 12
    assert info["trainable_parameters"] == _count(tuned.model.mlp) + _count(tuned.model.conv_repeat)
    assert tuned.predict(dataset[0]).shape == (1, N_TARGETS)
    assert np.isfinite(tuned.info["scores"]["test"]["mean"]["nrmse"])


@pytest.mark.parametrize("scheme", ["paper", "mlp"])
def test_cached_prefix_gives_the_same_outputs(tiny_graph, scheme):
    from torch_geometric.loader import DataLoader

    from driple.inspector.transfer import cache_frozen

    torch.manual_seed(0)
    model = freeze_for_transfer(Inspector(3, hidden_channels=8, num_repeats=6), scheme).eval()
    graphs = [tiny_graph(4 + i, seed=i) for i in range(5)]
    for g in graphs:
        g.y = torch.rand(1, N_TARGETS)
        del g.graph_attr, g.summary, g.feature_set, g.vocab_digest
    tail, cached = cache_frozen(model, graphs, scheme)
    full = next(iter(DataLoader(graphs, batch_size=5)))
    part = next(iter(DataLoader(cached, batch_size=5)))
    expected = model(full.x, full.edge_index, full.edge_weight, full.batch, 5)
    got = tail(part.x, part.edge_index, part.edge_weight, part.batch, 5)
    assert torch.allclose(expected, got, atol=1e-5)
    assert torch.equal(part.y, full.y)
    assert trainable_parameters(tail) == trainable_parameters(model)


def test_finetune_with_and_without_cache_agree(dataset):
    from driple.inspector.splits import random_split
    from driple.inspector.train import train_inspector

    opts = TrainOptions(epochs=3, patience=3)
    source = train_inspector(dataset, random_split(dataset), hidden_channels=8, num_repeats=4,
                             options=opts, progress=False)
    for scheme in ("paper", "mlp"):
        a = finetune(source, dataset, scheme=scheme, options=opts, progress=False, cache=True)
        b = finetune(source, dataset, scheme=scheme, options=opts, progress=False, cache=False)
        assert np.allclose(a.predict(dataset[0]), b.predict(dataset[0]), rtol=1e-4, atol=1e-5)


def test_graph_attr_model_trains_finetunes_and_round_trips(tmp_path, dataset):
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.splits import random_split
    from driple.inspector.train import train_inspector

    opts = TrainOptions(epochs=2, patience=2)
    source = train_inspector(dataset, random_split(dataset), hidden_channels=8, num_repeats=4,
                             graph_attr=True, options=opts, progress=False)
    assert source.model.graph_channels == 6
    source.save(str(tmp_path / "m"))
    loaded = load_inspector(str(tmp_path / "m"))
    assert np.array_equal(loaded.predict(dataset[0]), source.predict(dataset[0]))
    for scheme in ("paper", "mlp"):
        a = finetune(source, dataset, scheme=scheme, options=opts, progress=False, cache=True)
        b = finetune(source, dataset, scheme=scheme, options=opts, progress=False, cache=False)
        assert np.allclose(a.predict(dataset[0]), b.predict(dataset[0]), rtol=1e-4, atol=1e-5)


def test_finetune_options_keep_the_source_s_but_not_its_weight_average(dataset):
    """A hybrid source trained with the weights' moving average (its preset) fine-tunes without
    one: a decay per step is tuned to the source's step count, not to a few target jobs'."""
    from driple.inspector.splits import random_split
    from driple.inspector.train import HYBRID_EMA, preset, train_inspector
    from driple.inspector.transfer import finetune_options

    config, options = preset("hybrid", hidden_channels=16, num_repeats=2, epochs=2, patience=2, lr=2e-3)
    assert options.ema == HYBRID_EMA and preset("gnn")[1].ema == 0.0
    split = random_split(dataset)
    source = train_inspector(dataset[split.train], dataset[split.val], options, config, progress=False)
    assert source.info["training"]["ema"] == HYBRID_EMA
    tuned = finetune_options(source, {"epochs": 7})
    assert (tuned.ema, tuned.lr, tuned.epochs, tuned.target_scaling) == (0.0, 2e-3, 7, "ln")
    assert finetune_options(source, {"ema": 0.9}).ema == 0.9


def test_transfer_study_repeats_each_run_per_seed_and_scores_the_joined_inspector(dataset):
    """Seeds change which jobs a fraction keeps, not the test jobs; with a roofline each row
    scores the joined inspector and keeps the network's own; the summary compares seed means."""
    from driple.evaluation.transfer import mean_rows, run_study, summarize
    from driple.hardware.host_speed import HostSpeed
    from driple.inspector.splits import random_split
    from driple.inspector.train import preset, train_inspector

    split = random_split(dataset)
    config, options = preset("hybrid", hidden_channels=8, num_repeats=2, epochs=3, patience=3, networks=1)
    host = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
    source = train_inspector(dataset[split.train], dataset[split.val], options, config, host=host, progress=False)
    rows = run_study(source, dataset, [0.5, 1.0], ["scratch"], options, progress=False, seeds=[0, 1],
                     roofline=True)
    assert [(r["seed"], r["fraction"]) for r in rows] == [(0, 0.5), (0, 1.0), (1, 0.5), (1, 1.0)]
    assert all(r["roofline"] and np.isfinite(r["network_nrmse"]) and np.isfinite(r["nrmse"]) for r in rows)
    means = {r["fraction"]: r for r in mean_rows(rows)}
    half = [r["nrmse"] for r in rows if r["fraction"] == 0.5]
    assert means[0.5]["seeds"] == 2 and means[0.5]["nrmse"] == pytest.approx(np.mean(half))
    assert means[0.5]["nrmse_sd"] == pytest.approx(np.std(half))
    summary = summarize(rows, 0.05)
    assert summary[0].startswith(f"reference: scratch on 100% of the data, NRMSE {means[1.0]['nrmse']:.3f}, mean of 2 seeds")
    # one seed: the runs as before, no roofline unless asked
    single = run_study(source, dataset, [1.0], ["scratch"], options, progress=False)
    assert [r["seed"] for r in single] == [options.seed] and "network_nrmse" not in single[0]
