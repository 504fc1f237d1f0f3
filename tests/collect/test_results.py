"""The result table (atomic, append-safe, resumable) and job -> row arithmetic."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from driple.collect.labels.job import window_bytes
from driple.collect.results import BASE_COLUMNS, ResultTable, is_interrupted, load_results
from driple.metrics import METRICS


def _row(jid, status="ok", reason="", **extra):
    row = {c: None for c in BASE_COLUMNS}
    row.update({"job_id": jid, "setting": "cpu-ddp-w2-lo", "model": "mlp", "knobs": '{"a": 1}',
                "status": status, "reason": reason, **{m: 1.5 for m in METRICS}})
    row.update(extra)
    return row


def test_append_read_and_new_columns(tmp_path):
    table = ResultTable(tmp_path)
    assert len(table.read()) == 0 and list(table.read().columns) == list(BASE_COLUMNS)
    table.append(_row("a"))
    table.append(_row("b", "failed", "worker1 exited with code 1: boom", compute_share_BIB=0.9))
    df = load_results(tmp_path)
    assert list(df["job_id"]) == ["a", "b"]
    assert df.loc[0, "tx_burst_amount"] == 1.5
    assert math.isnan(df.loc[0, "compute_share_BIB"]) and df.loc[1, "compute_share_BIB"] == 0.9
    assert pd.read_csv(tmp_path / "results.csv")["knobs"][0] == '{"a": 1}'
    assert not list(tmp_path.glob(".results.csv*.tmp"))  # no temp file left behind


def test_last_row_wins_and_history_is_kept(tmp_path):
    table = ResultTable(tmp_path)
    table.append(_row("a", "failed", "interrupted by Ctrl-C/SIGTERM during the job"))
    table.append(_row("b", "failed", "timeout: job still running after 30 s"))
    table.append(_row("a", "ok"))
    assert dict(zip(table.read()["job_id"], table.read()["status"])) == {"a": "ok", "b": "failed"}
    assert len(table.read(history=True)) == 3
    assert table.done_ids() == {"a", "b"}
    assert table.done_ids(retry_failed=True) == {"a"}


def test_interrupted_jobs_are_not_done(tmp_path):
    table = ResultTable(tmp_path)
    table.append(_row("a"))
    table.append(_row("b", "failed", "interrupted by Ctrl-C/SIGTERM during the job"))
    assert table.done_ids() == {"a"}
    assert is_interrupted("interrupted by Ctrl-C") and not is_interrupted("timeout") and not is_interrupted(None)


def test_a_torn_write_never_shows(tmp_path, monkeypatch):
    """A crash while writing leaves the previous table intact (temp file + rename)."""
    table = ResultTable(tmp_path)
    table.append(_row("a"))
    before = (tmp_path / "results.csv").read_text()
    import driple.collect.results as results

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(results.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        table.append(_row("b"))
    assert (tmp_path / "results.csv").read_text() == before


def test_window_bytes_integrates_rates():
    # 10 ms samples of 100 MB/s for 1 s: 1e8 bytes/s; window of 0.5 s holds 5e7 bytes
    t = np.arange(1, 101) * 0.01
    df = pd.DataFrame({"compute": 1.0, "memory": 1.0, "tx": 100.0, "rx": 50.0}, index=pd.Index(t, name="t"))
    sent, received = window_bytes(df, 0.25, 0.75)
    assert sent == pytest.approx(5e7, rel=1e-6) and received == pytest.approx(2.5e7, rel=1e-6)
    sent, _ = window_bytes(df, 0.0, 10.0)  # the first row covers one period before its timestamp
    assert sent == pytest.approx(1e8, rel=1e-6)


def test_contended_rows_can_be_rerun(tmp_path):
    table = ResultTable(tmp_path)
    table.append(_row("quiet", host_other_cpu_pct=3.0))
    table.append(_row("busy", host_other_cpu_pct=41.0))
    table.append(_row("old"))  # written before the measure existed
    assert table.done_ids() == {"quiet", "busy", "old"}
    assert table.done_ids(max_contention=10.0) == {"quiet", "old"}
