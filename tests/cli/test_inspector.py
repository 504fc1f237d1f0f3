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
    assert report["split"] == "random" and set(report["scores"]) == {"inspector", "mean", "gbr"}
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
