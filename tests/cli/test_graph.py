"""`driple zoo` and `driple graph`, called as main([...])."""
import json

import torch

from driple.cli import main


def test_zoo_json(capsys):
    assert main(["zoo", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    families = {r["family"] for r in rows}
    assert len(families) >= 10 and any(r["name"] == "resnet50" for r in rows)


def test_graph_json_and_out(capsys, tmp_path):
    out = tmp_path / "g.pt"
    code = main(["graph", "mlp", "--batch-size", "8", "--groups", "10", "--json", "--out", str(out)])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["model"] == "mlp" and summary["batch_size"] == 8
    assert summary["groups"] == 10 and summary["strategy"] == "ddp" and summary["comm_nodes"] >= 1
    saved = torch.load(out, weights_only=True)
    assert saved["x"].shape[0] == 10


def test_graph_text(capsys):
    assert main(["graph", "mlp", "--strategy", "ps", "--servers", "2", "--groups", "8"]) == 0
    text = capsys.readouterr().out
    assert "op nodes" in text and "2 server shards" in text


def test_unknown_model_is_one_paragraph(capsys):
    assert main(["graph", "resnet5O"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("driple: error:") and "Traceback" not in err
    assert "resnet50" in err  # suggests the close name


def test_bad_knob(capsys):
    assert main(["graph", "mlp", "--set", "nosuchknob=3"]) == 2
    assert "knob" in capsys.readouterr().err
    assert main(["graph", "mlp", "--set", "oops"]) == 2
    assert "knob=value" in capsys.readouterr().err
