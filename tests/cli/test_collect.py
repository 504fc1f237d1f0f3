"""``driple collect`` command line: parsing, printing, help (jobs faked or shared)."""
from __future__ import annotations

import json

import pytest

import driple.collect.launcher as launcher
from driple.cli import main
from driple.collect.job import parse_knobs
from driple.collect.results import load_results
from driple.metrics import METRICS, unit


def test_knobs_are_yaml_scalars():
    assert parse_knobs(["depth=50", "width=0.5", "bn=true", "name=abc"]) == {
        "depth": 50, "width": 0.5, "bn": True, "name": "abc"}
    with pytest.raises(Exception, match="knob=value"):
        parse_knobs(["depth"])


def test_help_explains(capsys):
    with pytest.raises(SystemExit):
        main(["collect", "sweep", "--help"])
    text = capsys.readouterr().out
    assert "Ctrl-C" in text and "again" in text
    assert main(["collect"]) == 0
    assert "sweep" in capsys.readouterr().out


def test_bad_setting_or_model_is_a_user_error(capsys, tmp_path):
    assert main(["collect", "run", "mlp", "--setting", "cpu-ddp-x", "--out", str(tmp_path)]) == 2
    assert "cannot read setting" in capsys.readouterr().err
    assert main(["collect", "run", "no_such_model", "--out", str(tmp_path)]) == 2  # before any process starts
    assert "unknown model" in capsys.readouterr().err


@pytest.mark.slow
def test_run_prints_metrics_with_units_and_records_the_row(ddp_job, tmp_path, monkeypatch, capsys):
    _, result = ddp_job
    seen = {}

    def fake_run_job(spec, setting, **kw):
        seen.update(spec=spec, setting=setting, **kw)
        return result

    monkeypatch.setattr(launcher, "run_job", fake_run_job)
    args = ["collect", "run", "mlp", "--setting", "cpu-ps-p1w2-lo", "--batch-size", "64", "--seconds", "3",
            "--optimizer", "adam", "--set", "hidden=128", "--out", str(tmp_path)]
    assert main(args) == 0
    text = capsys.readouterr().out
    for m in METRICS:
        assert m in text
    assert f"{unit('tx_burst_amount')}" in text and "sent per iteration" in text
    spec = seen["spec"]
    assert (spec.model, spec.batch_size, spec.optimizer, spec.knobs) == ("mlp", 64, "adam", {"hidden": 128})
    assert seen["seconds"] == 3 and seen["setting"].id == "cpu-ps-p1w2-lo"
    assert list(load_results(tmp_path)["job_id"]) == [result.job_id]
    assert (tmp_path / "provenance.json").exists()

    assert main(args + ["--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["status"] == "ok" and set(METRICS) <= set(row)
