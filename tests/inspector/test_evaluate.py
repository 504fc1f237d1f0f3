import json

import numpy as np
import pytest

from driple.inspector.baselines import MeanBaseline, TabularBaseline
from driple.inspector.evaluate import evaluate, format_report, plot_predictions, to_json
from driple.inspector.splits import random_split
from driple.inspector.train import TrainOptions, train_inspector
from driple.metrics import METRICS

OPTS = TrainOptions(epochs=3, patience=3)


@pytest.fixture
def trained(dataset):
    return train_inspector(dataset, random_split(dataset), hidden_channels=8, num_repeats=2,
                           options=OPTS, progress=False)


def test_baselines_by_hand():
    X = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    y = np.array([[1.0, np.nan], [2.0, 4.0], [6.0, 8.0]])
    mean = MeanBaseline().fit(X, y)
    assert mean.predict(X[:1]).tolist() == [[3.0, 6.0]]
    knn = TabularBaseline("knn").fit(X, y)
    assert knn.predict(X).shape == (3, 2)
    assert np.allclose(knn.predict(X)[:, 0], y[:, 0])  # distance weights: exact at training points


def test_evaluate_random_uses_checkpoint_test_jobs(dataset, trained):
    assert trained.info["builder"] == {"groups": 100, "grouping": "uniform", "features": "driple",
                                       "seed": 42}  # what shaped its graphs, seed included
    report = evaluate(trained, dataset, split="random", progress=False)
    fold = report["folds"][0]
    assert fold["test_job_ids"] == trained.info["split"]["test"]
    assert set(report["scores"]) == {"inspector", "mean", "gbr"}
    assert set(report["scores"]["inspector"]) == {*METRICS, "mean"}
    # the mean baseline predicts the mean of the train + validation jobs
    fit_idx = sorted(set(random_split(dataset).train) | set(random_split(dataset).val))
    assert np.allclose(fold["predictions"]["mean"][0], dataset.targets[fit_idx].mean(0))
    text = format_report(report)
    assert "tx_burst_amount" in text and "inspector" in text and "gbr" in text
    json.dumps(to_json(report))  # JSON-ready without the arrays


def test_evaluate_family_retrains_per_family(dataset, trained):
    report = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False)
    assert [f["held_out"] for f in report["folds"]] == ["alpha", "beta", "gamma"]
    means = [f["scores"]["inspector"]["mean"]["nrmse"] for f in report["folds"]]
    assert report["scores"]["inspector"]["mean"]["nrmse"] == pytest.approx(np.mean(means))
    assert "held-out family" in format_report(report)
    one = evaluate(trained, dataset, split="family", baselines=("mean",), progress=False,
                   families=["beta"])
    assert [f["held_out"] for f in one["folds"]] == ["beta"]


def test_plot(tmp_path, dataset, trained):
    report = evaluate(trained, dataset, progress=False)
    path = plot_predictions(report, str(tmp_path / "scatter.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_evaluate_other_dataset_leaves_out_training_jobs(dataset, trained):
    record = dict(trained.info["split"])
    trained.info["split"] = {**record, "test": ["not-in-dataset"]}  # as if trained elsewhere
    report = evaluate(trained, dataset, baselines=("mean",), progress=False)
    tested = set(report["folds"][0]["test_job_ids"])
    assert tested and not tested & (set(record["train"]) | set(record["val"]))
