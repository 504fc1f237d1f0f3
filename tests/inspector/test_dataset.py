import os

import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.inspector.dataset import InspectorDataset, job_config
from driple.metrics import METRICS
from driple.metrics import target_names

N_TARGETS = len(target_names())  # the declared targets (labels v2: the 12 metrics and the step time)


def test_dataset_from_results_csv(fake_builder, synthetic_targets, write_dataset, tmp_path, label_columns):
    bad = ",".join(["j900", "cpu-ddp-w2-lo", "net0", "alpha", '"{}"', "8", "sgd", "failed"]
                   + ["" for _ in METRICS] + [""] + label_columns("")[1])
    # j001 ran again and failed: its last row counts
    retried = ",".join(["j001", "cpu-ddp-w2-lo", "net0", "alpha", '"{}"', "8", "sgd", "failed"]
                       + ["" for _ in METRICS] + [""] + label_columns("")[1])
    root = write_dataset(tmp_path / "S", n_configs=4, repeats=2, extra_rows=[bad, retried])
    ds = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)
    assert len(ds) == 7  # the failed jobs are left out
    assert ds.job_ids[:3] == ["j000", "j002", "j003"]
    assert ds.families[:4] == ["alpha", "beta", "beta", "gamma"]
    assert ds.feature_set == "driple" and ds.vocab_digest == "test-vocab"
    assert ds.setting == "cpu-ddp-w2-lo"
    assert ds.targets.shape == (7, N_TARGETS) and ds.graph_attrs.shape == (7, 6)
    item = ds[1]
    config = {"model": "net1", "knobs": {"seed": 1}, "batch_size": 8, "optimizer": "sgd",
              "setting": "cpu-ddp-w2-lo"}
    expected = fake_builder(config)
    assert torch.equal(item.x, expected.x) and torch.equal(item.edge_index, expected.edge_index)
    assert torch.allclose(item.y, synthetic_targets(expected), rtol=1e-5)
    assert ds.config_keys[1] == ds.config_keys[2]  # repeated measurements share one graph
    sub = ds[[1, 3]]
    assert sub.job_ids == ["j002", "j004"] and sub.targets.shape == (2, N_TARGETS)


def test_dataset_caches_graphs(fake_builder, write_dataset, tmp_path):
    root = write_dataset(tmp_path / "S", n_configs=3)
    calls = []

    def counting(config, **options):
        calls.append(config["knobs"]["seed"])
        return fake_builder(config, **options)

    InspectorDataset(root, builder=counting, builder_id="fake", progress=False)
    assert sorted(calls) == [0, 1, 2]
    InspectorDataset(root, builder=counting, builder_id="fake", progress=False)
    assert len(calls) == 3  # the collated dataset is reused
    # one more job: only its graph is built, the others come from the graph cache
    root = write_dataset(tmp_path / "S", n_configs=4)
    ds = InspectorDataset(root, builder=counting, builder_id="fake", progress=False)
    assert sorted(calls) == [0, 1, 2, 3] and len(ds) == 4
    # other builder options are another cache entry
    InspectorDataset(root, groups=50, builder=counting, builder_id="fake", progress=False)
    assert len(calls) == 8
    assert os.path.isdir(os.path.join(tmp_path, ".graph-cache"))  # shared beside the datasets


def test_grouping_seed_keys_the_graph_cache_and_reaches_the_builder(fake_builder, write_dataset, tmp_path):
    root = write_dataset(tmp_path / "S", n_configs=3)
    seeds = []

    def recording(config, **options):
        seeds.append(options["seed"])
        return fake_builder(config, **options)

    ds = InspectorDataset(root, builder=recording, builder_id="fake", progress=False)
    assert seeds == [42] * 3 and ds.options["seed"] == 42
    other = InspectorDataset(root, seed=7, builder=recording, builder_id="fake", progress=False)
    assert seeds == [42] * 3 + [7] * 3  # not the graphs cached for seed 42
    assert other.options == {"groups": 100, "grouping": "uniform", "features": "driple", "seed": 7}
    assert ds.graph_key(job_config(ds.frame.iloc[0])) != other.graph_key(job_config(ds.frame.iloc[0]))


def test_graph_cache_shared_by_settings_with_the_same_graph(fake_builder, write_dataset, tmp_path):
    calls = []

    def counting(config, **options):
        calls.append(config["setting"])
        return fake_builder(config, **options)

    lo = write_dataset(tmp_path / "lo", n_configs=2)
    InspectorDataset(lo, builder=counting, builder_id="fake", progress=False)
    assert calls == ["cpu-ddp-w2-lo"] * 2
    one_g = write_dataset(tmp_path / "1g", n_configs=2, setting="cpu-ddp-w2-1g")
    ds = InspectorDataset(one_g, builder=counting, builder_id="fake", progress=False)
    assert len(calls) == 2 and ds.setting == "cpu-ddp-w2-1g"  # DDP on 1g: the same graphs
    ps = write_dataset(tmp_path / "ps", n_configs=2, setting="cpu-ps-p1w2-1g")
    InspectorDataset(ps, builder=counting, builder_id="fake", progress=False)
    assert calls[2:] == ["cpu-ps-p1w2-1g"] * 2  # a PS graph differs


def test_contended_rows_are_left_out(fake_builder, write_dataset, tmp_path):
    root = write_dataset(tmp_path / "S", n_configs=4)
    import pandas as pd

    frame = pd.read_csv(os.path.join(root, "results.csv"))
    frame["host_other_cpu_pct"] = [1.0, 30.0, float("nan"), 9.9]
    frame.to_csv(os.path.join(root, "results.csv"), index=False)
    ds = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)
    assert ds.job_ids == ["j000", "j002", "j003"]
    every = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False,
                             max_contention=None)
    assert len(every) == 4


def test_parallel_build_matches_serial(fake_builder, write_dataset, tmp_path):
    root = write_dataset(tmp_path / "S", n_configs=3)
    par = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False,
                           workers=2)
    ser = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False,
                           graph_cache=str(tmp_path / "other-cache"), force_reload=True)
    assert len(par) == len(ser) == 3
    for a, b in zip(par, ser):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)


def test_dataset_skips_unbuildable_graphs(fake_builder, write_dataset, tmp_path, label_columns):
    row = ",".join(["j900", "cpu-ddp-w2-lo", "broken", "delta", '"{}"', "8", "sgd", "ok"]
                   + ["1" for _ in METRICS] + ["0.1"] + label_columns("1")[1])
    root = write_dataset(tmp_path / "S", n_configs=3, extra_rows=[row])
    with pytest.warns(UserWarning, match="1 of 4 graph"):
        ds = InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)
    assert len(ds) == 3


def test_dataset_errors(fake_builder, tmp_path):
    with pytest.raises(DripleError, match="results.csv"):
        InspectorDataset(str(tmp_path), builder=fake_builder, builder_id="fake")
    (tmp_path / "results.csv").write_text("job_id,status\nj1,ok\n")
    with pytest.raises(DripleError, match="lacks the column"):
        InspectorDataset(str(tmp_path), builder=fake_builder, builder_id="fake")
    with pytest.raises(DripleError, match="JSON"):
        job_config({"model": "m", "knobs": "{depth", "batch_size": 1, "optimizer": "sgd", "setting": "s"})


def _tiny_zoo_builder(config, groups=100, grouping="uniform", features="driple", seed=42):
    from driple.graph.build import build_zoo_input
    from driple.graph.features import OpVocabulary

    vocab = OpVocabulary({"aten.addmm.default": 4, "aten.relu.default": 2}, corpus="test")
    return build_zoo_input(config["model"], batch_size=config["batch_size"],
                           optimizer=config["optimizer"], strategy=config["setting"], groups=groups,
                           grouping=grouping, features=features, seed=seed, vocabulary=vocab,
                           **config["knobs"])


def test_dataset_with_zoo_models(tmp_path, label_columns):
    """The real builder on two tiny zoo MLPs (targets are placeholders)."""
    pytest.importorskip("driple.zoo")
    pytest.importorskip("driple.graph.build")
    root = tmp_path / "cpu-ddp-w2-lo"
    root.mkdir()
    header = ["job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "status", *METRICS,
              *label_columns()[0]]
    rows = [",".join(header)]
    for i, hidden in enumerate((16, 32)):
        knobs = f'"{{""input_dim"": 8, ""hidden"": {hidden}, ""layers"": 1}}"'
        rows.append(",".join([f"j{i}", "cpu-ddp-w2-lo", "mlp", "mlp", knobs, "4", "sgd", "ok"]
                             + [str(1.0 + i)] * len(METRICS) + label_columns(str(1.0 + i))[1]))
    (root / "results.csv").write_text("\n".join(rows) + "\n")
    ds = InspectorDataset(str(root), groups=6, builder=_tiny_zoo_builder, builder_id="zoo-test",
                          progress=False)
    assert len(ds) == 2
    assert ds[0].x.size(1) == 3 and 1 <= ds[0].x.size(0) <= 6
    assert ds[0].grouping_key == "uniform-M6-seed42"  # cached with the graph
    assert ds.graph_attrs[1, 0] > ds.graph_attrs[0, 0]  # more parameters with the wider MLP
    assert np.allclose(ds.targets[1], 2.0)
