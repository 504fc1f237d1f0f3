import json

import pytest

import driple.inspector.dataset as dataset_module
from driple.cli import main


@pytest.fixture(autouse=True)
def fake_zoo(fake_builder, monkeypatch):
    monkeypatch.setattr(dataset_module, "zoo_graph", fake_builder)
    monkeypatch.setattr(dataset_module, "_zoo_builder_id", lambda: "fake")


def test_train_evaluate_finetune(tmp_path, dataset_dir, capsys):
    out = tmp_path / "trained"
    assert main(["train", "--dataset", dataset_dir, "--out", str(out), "--groups", "4", "--hidden", "8",
                "--epochs", "3", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "saved" in text and "tx_burst_amount" in text
    assert (out / "inspector.pt").exists() and (out / "scores.json").exists()

    assert main(["evaluate", str(out), "--dataset", dataset_dir, "--json", "--quiet",
                "--plot", str(tmp_path / "p.png")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["split"] == "random" and set(report["scores"]) == {"inspector", "mean", "hgb", "knn"}
    assert (tmp_path / "p.png").exists()

    assert main(["evaluate", str(out), "--quiet"]) == 0  # dataset taken from the checkpoint
    assert "NRMSE" in capsys.readouterr().out

    assert main(["finetune", "--from", str(out), "--dataset", dataset_dir, "--fraction", "0.5",
                "--scheme", "mlp", "--epochs", "2", "--out", str(tmp_path / "tuned"), "--quiet"]) == 0
    assert "fine-tuned cpu-ddp-w2-lo -> cpu-ddp-w2-lo (mlp" in capsys.readouterr().out
    assert (tmp_path / "tuned" / "inspector.pt").exists()


def test_user_errors_exit_2(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "nothing"), "--dataset", str(tmp_path)]) == 2
    assert "no inspector checkpoint" in capsys.readouterr().err
    assert main(["train", "--dataset", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "results.csv" in capsys.readouterr().err


def _transferred(tmp_path, dataset_dir, write_dataset):
    """A source checkpoint trained on ``dataset_dir`` (cpu-ddp-w2-lo) and one transferred from it
    to a cpu-ddp-w2-1g dataset; ``(source dir, tuned dir, target dataset dir)``."""
    target = write_dataset(tmp_path / "cpu-ddp-w2-1g", setting="cpu-ddp-w2-1g")
    src, tuned = tmp_path / "src", tmp_path / "tuned"
    assert main(["train", "--dataset", dataset_dir, "--out", str(src), "--hidden", "8", "--repeats", "2",
                 "--epochs", "3", "--quiet"]) == 0
    assert main(["finetune", "--from", str(src), "--dataset", target, "--fraction", "1",
                 "--epochs", "2", "--out", str(tuned), "--quiet"]) == 0
    return src, tuned, target


def test_evaluate_transferred_family_split_is_the_library_call(tmp_path, dataset_dir, write_dataset, capsys):
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.evaluate import evaluate, to_json

    src, tuned, target = _transferred(tmp_path, dataset_dir, write_dataset)
    capsys.readouterr()
    argv = ["evaluate", str(tuned), "--dataset", target, "--split", "family", "--family", "beta",
            "--estimators", "mean,knn", "--epochs", "2", "--quiet", "--json"]
    assert main(argv + ["--source", str(src)]) == 0
    seen = json.loads(capsys.readouterr().out)
    assert seen["notes"] == {"inspector": ["family beta seen in source (cpu-ddp-w2-lo)"]}
    assert main(argv + ["--source", str(src), "--retrain-source", "--source-dataset", dataset_dir]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["notes"] == {} and cli["transfer"]["source_retrained"] is True

    lib = evaluate(load_inspector(str(tuned)), InspectorDataset(target, progress=False), split="family",
                   baselines=["mean", "knn"], families=["beta"], overrides={"epochs": 2},
                   source=load_inspector(str(src)), source_dataset=InspectorDataset(dataset_dir, progress=False),
                   retrain_source=True, progress=False)
    assert cli["scores"] == to_json(lib)["scores"] and cli["folds"][0]["n_test"] == 4


def test_evaluate_refuses_source_options_for_a_scratch_checkpoint(tmp_path, dataset_dir, capsys):
    out = tmp_path / "trained"
    assert main(["train", "--dataset", dataset_dir, "--out", str(out), "--hidden", "8", "--repeats", "2",
                 "--epochs", "2", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--retrain-source", "--quiet"]) == 2
    assert "trained from scratch" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--estimators", "mean,nope", "--quiet"]) == 2
    assert "unknown estimator(s) nope" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--no-inspector", "--estimators", "", "--quiet"]) == 2
    assert "--no-inspector needs --estimators" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--no-inspector", "--retrain", "--quiet"]) == 2
    assert "retrains nothing" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--no-inspector", "--split", "family", "--estimators", "mean",
                 "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["estimators"] == ["mean"] and report["inspector"] == "not evaluated"
