"""``driple collect`` command line: parsing, printing, help (jobs faked or shared)."""
from __future__ import annotations

import json
import os

import pytest

import driple.collect.launcher as launcher
from driple.cli import main
from driple.collect.job import job_id
from driple.collect.results import ResultTable, load_results
from driple.collect.sweep import load_grid
from driple.metrics import METRICS, unit


def test_help_explains(capsys):
    with pytest.raises(SystemExit):
        main(["collect", "sweep", "--help"])
    text = capsys.readouterr().out
    assert "Ctrl-C" in text and "again" in text
    assert main(["collect"]) == 0
    assert "sweep" in capsys.readouterr().out


def test_grid_sweep_and_cleanup_through_main(capsys, tmp_path):
    grid = tmp_path / "grid.yaml"
    assert main(["collect", "grid", "--out", str(grid), "--n", "3", "--seconds", "2"]) == 0
    assert "wrote 3 jobs" in capsys.readouterr().out
    jobs = load_grid(grid)["jobs"]
    out = tmp_path / "data"
    for spec in jobs:  # every job already measured: the sweep has nothing left to run
        ResultTable(out).append({"job_id": job_id(spec, "cpu-ddp-w2-lo", 2.0), "status": "ok"})
    assert main(["collect", "sweep", "--grid", str(grid), "--out", str(out), "--setting",
                 "cpu-ddp-w2-lo", "--no-progress"]) == 0
    assert "3 jobs: 3 done before, 0 ok, 0 failed" in capsys.readouterr().out
    assert main(["collect", "cleanup"]) == (0 if os.geteuid() == 0 else 2)  # stale leftovers only


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
