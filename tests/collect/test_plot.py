"""The burst/idle plot of a real job (shares the session's DDP job)."""
from __future__ import annotations

import pytest

from driple.cli import main
from driple.collect.plot import plot_job, resolve_run
from driple.errors import DripleError

pytestmark = pytest.mark.slow  # needs the real DDP job of the session


def test_plot_by_dataset_id_and_file(ddp_job, tmp_path):
    out, result = ddp_job
    jid = result.job_id
    assert resolve_run(out) == (result.raw_path, result.detail_path)
    assert resolve_run(jid, dataset=out)[0] == result.raw_path
    assert resolve_run(result.detail_path)[0] == result.raw_path
    png = plot_job(jid, tmp_path / "a.png", dataset=out)
    assert png.stat().st_size > 20_000 and png.read_bytes()[:4] == b"\x89PNG"
    whole = plot_job(result.raw_path, tmp_path / "b.svg", targets=["worker1"], span=0)
    assert "worker1" in whole.read_text()


def test_plot_errors_are_explained(ddp_job, tmp_path):
    out, result = ddp_job
    with pytest.raises(DripleError, match="no job"):
        resolve_run("nope", dataset=out)
    with pytest.raises(DripleError, match="no rank server0"):
        plot_job(out, tmp_path / "x.png", targets=["server0"])


def test_cli_plot(ddp_job, tmp_path, capsys):
    out, result = ddp_job
    assert main(["collect", "plot", result.job_id, "--dataset", str(out), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").exists()
    assert main(["collect", "plot", "missing-id", "--dataset", str(out), "--out", str(tmp_path / "d.png")]) == 2
