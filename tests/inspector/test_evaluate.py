import json

import numpy as np
import pytest

from driple.errors import DripleError
from driple.inspector.dataset import InspectorDataset
from driple.inspector.estimator_registry import make_estimator
from driple.inspector.estimators import Estimator, positions
from driple.inspector.evaluate import (evaluate, format_report, plot_predictions, run_folds,
                                       source_split_for, to_json, win_counts)
from driple.inspector.jobs import job_table
from driple.inspector.scores import nrmse
from driple.inspector.splits import family_splits, random_split
from driple.inspector.train import TrainOptions, train_inspector
from driple.metrics import TARGETS

OPTS = TrainOptions(epochs=3, patience=3)


class Truth(Estimator):
    """Predicts the measured targets: error 0 everywhere."""

    name = "truth"

    def fit(self, dataset, train, val):
        return self

    def predict(self, dataset, idx=None):
        return dataset.targets[positions(dataset, idx)]


class Peek(Estimator):
    """Records what it was given; predicts 1."""

    seen = []

    def fit(self, dataset, train, val):
        Peek.seen.append((list(train), list(val)))
        self.note_ = "peeked"
        return self

    def predict(self, dataset, idx=None):
        return np.ones((len(positions(dataset, idx)), len(dataset.target_names)))


@pytest.fixture
def trained(dataset):
    return train_inspector(dataset, random_split(dataset), hidden_channels=8, num_repeats=2,
                           options=OPTS, progress=False)


def test_run_folds_by_hand(dataset):
    folds = family_splits(dataset)
    Peek.seen = []
    report = run_folds(dataset, folds, {"truth": lambda f: Truth(), "mean": lambda f: make_estimator("mean"),
                                        "peek": lambda f: Peek()}, progress=False)
    y = dataset.targets
    assert [f["held_out"] for f in report["folds"]] == ["alpha", "beta", "gamma"]
    # estimators see the fold's train and val jobs only
    assert Peek.seen == [(f.train, f.val) for f in folds]
    for fold, entry in zip(folds, report["folds"]):
        assert np.allclose(entry["predictions"]["mean"], y[fold.train].mean(0))  # train only, not val
        assert entry["calibration_predictions"]["truth"].shape == (len(fold.calibration), len(TARGETS))
    # pooled: every test job once, one normalisation per target
    measured = np.concatenate([y[f.test] for f in folds])
    pooled_mean = np.concatenate([np.tile(y[f.train].mean(0), (len(f.test), 1)) for f in folds])
    assert report["n_test"] == len(y)
    for j, t in enumerate(TARGETS):
        assert report["scores"]["mean"][t]["nrmse"] == pytest.approx(nrmse(measured[:, j], pooled_mean[:, j])[0])
        assert report["scores"]["truth"][t]["nrmse"] == 0
    # fold_mean: the mean of the folds' tables
    assert report["fold_mean"]["mean"]["mean"]["nrmse"] == pytest.approx(
        np.mean([f["scores"]["mean"]["mean"]["nrmse"] for f in report["folds"]]))
    assert report["wins"]["nrmse"] == {"truth": len(TARGETS), "mean": 0, "peek": 0}
    assert report["notes"] == {"peek": ["peeked"]}
    text = format_report(report)
    assert "held-out family" in text and "targets won" in text and "peek: peeked" in text
    json.dumps(to_json(report))


def test_noise_floor_beside_the_table(dataset):
    folds = [random_split(dataset)]
    floor = {"again": "S-retest", "jobs": ["a", "b"],
             "labels": {t: {"nrmse": 0.05, "mape": 4.0, "n": 2} for t in TARGETS}}
    report = run_folds(dataset, folds, {"truth": lambda f: Truth(), "mean": lambda f: make_estimator("mean")},
                       floor=floor, progress=False)
    check = report["floor_check"]["nrmse"]["tx_burst_amount"]
    assert check == {"floor": 0.05, "best": "truth", "error": 0.0, "ratio": 0.0, "within": True}
    assert report["noise_floor"]["n_jobs"] == 2
    text = format_report(report)
    assert "noise floor: S-retest (2 jobs measured twice)" in text and "floor" in text and "0.0x ok" in text


def test_win_counts_ties_count_for_both():
    t = lambda e: {"a": {"nrmse": e, "mape": None}}  # noqa: E731
    assert win_counts({"x": t(0.1), "y": t(0.1), "z": t(0.2)}, ["a"])["nrmse"] == {"x": 1, "y": 1, "z": 0}
    assert win_counts({"x": t(0.1)}, ["a"])["mape"] == {"x": 0}


def test_a_wrong_shaped_prediction_is_named(dataset):
    class Bad(Truth):
        def predict(self, dataset, idx=None):
            return np.zeros((1, 2))

    with pytest.raises(DripleError, match="estimator 'bad' predicted an array of shape"):
        run_folds(dataset, [random_split(dataset)], {"bad": lambda f: Bad()}, progress=False)


def test_evaluate_random_uses_checkpoint_test_jobs(dataset, trained):
    record = trained.info["split"]
    assert record["group_by"] == "architecture" and record["calibration"]
    report = evaluate(trained, dataset, split="random", progress=False)
    fold = report["folds"][0]
    assert fold["test_job_ids"] == record["test"]
    assert report["estimators"] == ["inspector", "mean", "hgb", "knn"]
    assert set(report["scores"]["inspector"]) == {*TARGETS, "mean"}
    train = [dataset.job_ids.index(j) for j in record["train"]]
    assert np.allclose(fold["predictions"]["mean"][0], dataset.targets[train].mean(0))
    assert np.allclose(fold["predictions"]["inspector"],
                       trained.predict([dataset[dataset.job_ids.index(j)] for j in record["test"]]))
    text = format_report(report)
    assert "tx_burst_amount" in text and "inspector" in text and "hgb" in text and "calibration" in text


def test_evaluate_old_record_leaves_out_seen_jobs(dataset, trained):
    record = dict(trained.info["split"])
    trained.info["split"] = {k: v for k, v in record.items() if k not in ("group_by", "calibration")}
    report = evaluate(trained, dataset, baselines=("mean",), progress=False)
    tested = set(report["folds"][0]["test_job_ids"])
    assert tested and not tested & (set(record["train"]) | set(record["val"]))


def test_evaluate_family_retrains_per_family_and_caches(dataset, trained):
    cache = {}
    report = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False,
                      overrides={"epochs": 2}, cache=cache)
    assert [f["held_out"] for f in report["folds"]] == ["alpha", "beta", "gamma"]
    assert len(cache) == 3 and report["inspector"] == "retrained per fold"
    again = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False,
                     overrides={"epochs": 2}, cache=cache)
    assert len(cache) == 3 and again["scores"] == report["scores"]
    one = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False,
                   families=["beta"], overrides={"epochs": 2})
    assert [f["held_out"] for f in one["folds"]] == ["beta"]
    assert one["folds"][0]["scores"] == report["folds"][1]["scores"]  # same fold, same training


def test_evaluate_without_the_inspector_scores_the_estimators_on_the_same_folds(dataset, trained):
    """``with_inspector=False``: no retraining, the same folds and the same baseline scores."""
    full = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False,
                    overrides={"epochs": 2})
    alone = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False,
                     with_inspector=False)
    assert alone["estimators"] == ["mean"] and alone["inspector"] == "not evaluated"
    assert [f["test_job_ids"] for f in alone["folds"]] == [f["test_job_ids"] for f in full["folds"]]
    assert alone["scores"]["mean"] == full["scores"]["mean"]
    with pytest.raises(DripleError, match="nothing to evaluate"):
        evaluate(trained, dataset, split="family", baselines=(), progress=False, with_inspector=False)


@pytest.fixture
def target(fake_builder, write_dataset, tmp_path):
    root = write_dataset(tmp_path / "cpu-ddp-w2-1g", setting="cpu-ddp-w2-1g")
    return InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)


def test_transferred_family_split_retrains_the_source_without_the_family(dataset, trained, target):
    from driple.inspector.transfer import finetune

    tuned = finetune(trained, target, split=random_split(target), options=OPTS, progress=False)
    with pytest.raises(DripleError, match="needs its source"):
        evaluate(tuned, target, split="family", progress=False)
    seen = evaluate(tuned, target, split="family", baselines=(), source=trained, progress=False,
                    overrides={"epochs": 2})
    assert seen["notes"]["inspector"] == [f"family {f} seen in source (cpu-ddp-w2-lo)"
                                          for f in ("alpha", "beta", "gamma")]
    cache = {}
    honest = evaluate(tuned, target, split="family", baselines=(), source=trained, source_dataset=dataset,
                      retrain_source=True, progress=False, overrides={"epochs": 2}, cache=cache)
    assert honest["notes"] == {} and honest["transfer"]["source_retrained"] is True
    # one source per fold, none trained or validated on a job of its held-out family
    fams = dict(zip(dataset.job_ids, dataset.families))
    held = set()
    for model in cache.values():
        used = {fams[j] for j in model.info["split"]["train"] + model.info["split"]["val"]}
        assert len(used) == 2
        held |= {"alpha", "beta", "gamma"} - used
    assert held == {"alpha", "beta", "gamma"} and len(cache) == 3
    # the source setting's own family evaluation trains the same folds: all reused
    evaluate(trained, dataset, split="family", baselines=(), progress=False, overrides={"epochs": 2},
             cache=cache)
    assert len(cache) == 3


def test_source_split_for_a_random_fold_holds_out_the_test_architectures(dataset, target):
    fold = random_split(target, seed=1)
    ssplit = source_split_for(fold, target, dataset, seed=1)
    archs = set(job_table(target)["architecture"].iloc[fold.test])
    source = job_table(dataset)["architecture"]
    assert {source[i] for i in ssplit.test} == archs
    assert not archs & {source[i] for i in ssplit.train + ssplit.val + ssplit.calibration}


def test_plot(tmp_path, dataset, trained):
    report = evaluate(trained, dataset, progress=False)
    path = plot_predictions(report, str(tmp_path / "scatter.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_checkpoint_without_a_recorded_configuration_retrains_as_the_paper_gnn(trained):
    """v1 checkpoints predate ``info["configuration"]``: their folds are the paper's GNN of the
    recorded sizes, with the legacy graph attributes when the head read them."""
    from driple.inspector.estimators import GNNEstimator

    trained.info.pop("configuration")
    est = GNNEstimator.from_checkpoint(trained)
    assert est.config.kind == "gnn" and not est.config.residual
    assert (est.config.hidden_channels, est.config.num_repeats) == (8, 2)
    assert est.config.graph_attr is False and est.options.epochs == OPTS.epochs


def _external(write_dataset, fake_builder, root, setting="cpu-ddp-w2-lo", n_configs=6):
    """A dataset of other jobs (ids ``x...``) of ``setting``."""
    from pathlib import Path

    root = write_dataset(root, n_configs=n_configs, setting=setting)
    path = Path(root, "results.csv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *("x" + line for line in lines[1:])]) + "\n")
    return InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)


def test_evaluate_on_an_external_set(dataset, trained, tmp_path, write_dataset, fake_builder):
    """``external``: every job of another dataset is the test part, scored by the inspector as
    trained and by baselines fitted on the checkpoint's own training jobs."""
    ext = _external(write_dataset, fake_builder, tmp_path / "ext" / "cpu-ddp-w2-lo")
    report = evaluate(trained, dataset, external=ext, progress=False)
    fold = report["folds"][0]
    assert fold["kind"] == "external" and fold["test_job_ids"] == list(ext.job_ids)
    assert report["n_test"] == len(ext) and report["test_dataset"] == str(ext.root)
    train = [dataset.job_ids.index(j) for j in trained.info["split"]["train"]]
    assert fold["n_train"] == len(train) and fold["n_calibration"] == len(trained.info["split"]["calibration"])
    assert np.allclose(fold["predictions"]["mean"], dataset.targets[train].mean(0))
    assert np.allclose(fold["predictions"]["inspector"], trained.predict([ext[i] for i in range(len(ext))]))
    assert np.allclose(fold["measured"], ext.targets)
    assert report["scores"]["mean"]["tx_burst_amount"]["nrmse"] == pytest.approx(
        nrmse(ext.targets[:, TARGETS.index("tx_burst_amount")], fold["predictions"]["mean"][:, TARGETS.index("tx_burst_amount")])[0])
    assert f"test: {len(ext)} jobs of {ext.root}" in format_report(report)
    with pytest.raises(DripleError, match="also in the inspector's dataset"):
        evaluate(trained, dataset, external=dataset, progress=False)
    other = _external(write_dataset, fake_builder, tmp_path / "other" / "cpu-ddp-w2-1g", setting="cpu-ddp-w2-1g")
    with pytest.raises(DripleError, match="ran in cpu-ddp-w2-1g"):
        evaluate(trained, dataset, external=other, progress=False)
