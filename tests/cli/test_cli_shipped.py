"""Shipped inspectors and datasets are never written by a default, called as main([...])."""
import hashlib
import json
from pathlib import Path

import pytest
import torch

from driple.cli import build_parser, main
from driple.shipped import shipped_root

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path):
    """A driple checkout's layout: trained_models/ with a registry, datasets/ beside it."""
    (tmp_path / "trained_models" / "cpu-ddp-w2-lo").mkdir(parents=True)
    (tmp_path / "trained_models" / "registry.json").write_text(json.dumps(
        {"format": "driple-registry", "version": 1, "default": None, "inspectors": []}))
    (tmp_path / "datasets" / "cpu-ddp-w2-lo").mkdir(parents=True)
    (tmp_path / "datasets" / "cpu-ddp-w2-lo" / "results.csv").write_text("job_id,status\n")
    return tmp_path


def test_the_rule(checkout, tmp_path):
    models, data = checkout / "trained_models", checkout / "datasets"
    assert shipped_root(models / "cpu-ddp-w2-lo") == (models, "inspector")
    assert shipped_root(models / "new" / "inspector.pt") == (models, "inspector")  # not yet there
    assert shipped_root(data / "cpu-ddp-w2-lo") == (data, "dataset")
    assert shipped_root(data / "another" / "grid.yaml") == (data, "dataset")
    assert shipped_root(checkout / "runs" / "cpu-ddp-w2-lo") is None
    assert shipped_root(tmp_path / "elsewhere" / "datasets" / "x") is None  # no checkout beside it
    assert shipped_root(ROOT / "trained_models" / "cpu-ddp-w2-lo")[1] == "inspector"
    assert shipped_root(ROOT / "datasets" / "cpu-ddp-w2-lo")[1] == "dataset"


def test_commands_refuse_shipped_directories(checkout, capsys):
    models, data = checkout / "trained_models", checkout / "datasets"
    dataset = str(data / "cpu-ddp-w2-lo")
    refused = [
        ["train", "--dataset", dataset, "--out", str(models / "cpu-ddp-w2-lo")],
        ["train", "--dataset", dataset, "--out", str(data / "cpu-ddp-w2-lo" / "model")],
        ["finetune", "--from", str(models / "cpu-ddp-w2-lo"), "--dataset", dataset,
         "--out", str(models / "cpu-ddp-w2-1g")],
        ["collect", "run", "mlp", "--out", dataset],
        ["collect", "sweep", "--grid", "g.yaml", "--out", dataset],
        ["collect", "grid", "--out", str(data / "cpu-ddp-w2-lo" / "grid.yaml")],
        ["collect", "corun", "mlp,bs=4", "mlp,bs=8", "--out", str(data / "corun")],
    ]
    for argv in refused:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("driple: error: --out ") and "--overwrite-shipped" in err, err
        assert err.count("\n") == 1
    assert sorted(p.name for p in (data / "cpu-ddp-w2-lo").iterdir()) == ["results.csv"]
    assert sorted(p.name for p in models.iterdir()) == ["cpu-ddp-w2-lo", "registry.json"]
    # with the flag the command goes on (and stops at its next check: the grid is missing)
    assert main(["collect", "sweep", "--grid", str(checkout / "no.yaml"), "--out", dataset,
                 "--overwrite-shipped"]) == 2
    assert "cannot read grid" in capsys.readouterr().err


def test_the_repository_inspectors_are_refused_untouched(capsys):
    card = ROOT / "trained_models" / "cpu-ddp-w2-lo" / "inspector.pt"
    before = hashlib.sha256(card.read_bytes()).hexdigest()
    assert main(["train", "--dataset", str(ROOT / "datasets" / "v2" / "cpu-ddp-w2-lo"),
                 "--out", str(ROOT / "trained_models" / "cpu-ddp-w2-lo")]) == 2
    assert "shipped inspector directory" in capsys.readouterr().err
    assert hashlib.sha256(card.read_bytes()).hexdigest() == before


def test_finetune_needs_out(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["finetune", "--from", "x", "--dataset", "y"])
    assert exit_.value.code == 2 and "--out" in capsys.readouterr().err


def test_train_defaults_are_the_shipped_source_inspectors():
    """`driple train` with no options trains what trained_models/cpu-ddp-w2-lo records."""
    state = torch.load(ROOT / "trained_models" / "cpu-ddp-w2-lo" / "inspector.pt",
                       map_location="cpu", weights_only=True)
    from driple.cli.inspector import training_choices

    args = build_parser().parse_args(["train", "--dataset", "d", "--out", "o"])
    config_, options = training_choices(args)
    training = {k: getattr(options, k) for k in ("lr", "weight_decay", "epochs", "patience",
                                                 "batch_size", "target_scaling", "seed")}
    assert training == {k: state["training"][k] for k in training}
    assert config_.kind == state["configuration"]["kind"] == "hybrid" and config_.residual
    assert (args.epochs, args.patience, args.repeats) == (300, 30, 10)
    assert args.trees == (state.get("trees") is not None)  # the shipped source's members
    assert args.roofline == (state.get("roofline") is not None)
    recorded = state["configuration"]
    members = state["config"].get("members")  # the networks averaged: one configuration
    assert config_.networks == recorded["networks"] == (len(members) if members else 1)
    assert (config_.hidden_channels, config_.num_repeats, config_.dropout, config_.graph_attr) == (
        recorded["hidden_channels"], recorded["num_repeats"], recorded["dropout"],
        recorded["graph_attr"])
    from driple.graph.grouping import DEFAULT_SEED

    assert {"groups": args.groups, "grouping": args.grouping, "features": args.features,
            "seed": DEFAULT_SEED} == state["builder"]
    assert args.split == state["split"]["kind"]
