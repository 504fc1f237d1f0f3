"""Co-runs: the overlap and combined-load arithmetic on hand-made series, the co-run table and
grid, the supervision of the collectors (with stand-in collectors: failure, Ctrl-C, a collector
that will not stop), and one real co-run of two tiny DDP jobs (marked slow)."""
from __future__ import annotations

import json
import math
import os
import signal
import sys
import textwrap
import threading
import time

import numpy as np
import pandas as pd
import psutil
import pytest

from driple.collect import corun
from driple.collect.corun import (
    CoRunInterrupted, CoRunTable, combine, corun_id, corun_row, job_window, load_corun_grid,
    measure, measured_combined, overlap_window, read_corun, run_corun, window_mean,
)
from driple.collect.job import JobSpec
from driple.errors import DripleError
from driple.settings import parse_setting


def _frame(t, **cols):
    return pd.DataFrame({r: cols.get(r, np.zeros(len(t))) for r in ("compute", "memory", "tx", "rx")},
                        index=pd.Index(np.asarray(t, dtype=float), name="t"))


# -- arithmetic ------------------------------------------------------------------------------------
def test_overlap_window():
    assert overlap_window([(0, 10), (5, 20)]) == (5, 10)
    assert overlap_window([(0, 10), (5, 20), (7, 9)]) == (7, 9)
    assert overlap_window([(0, 10), (10, 20)]) is None  # touching is not overlapping
    assert overlap_window([(0, 10), (12, 20)]) is None
    assert overlap_window([]) is None


def test_job_window_spans_its_workers_only():
    per_rank = {"server0": {"window_ns": [0, 100]}, "worker0": {"window_ns": [10, 50]},
                "worker1": {"window_ns": [12, 60]}}
    assert job_window(per_rank) == (10, 60)
    with pytest.raises(ValueError):
        job_window({"server0": {"window_ns": [0, 1]}})


def test_window_mean_takes_samples_whose_period_ends_inside():
    df = _frame([0.1, 0.2, 0.3, 0.4, 0.5], compute=[10, 20, 30, 40, 50], tx=[1, 1, 1, 5, 5])
    m = window_mean(df, 0.2, 0.4)  # samples at 0.3 and 0.4
    assert m["compute"] == pytest.approx(35.0) and m["tx"] == pytest.approx(3.0) and m["memory"] == 0.0
    assert math.isnan(window_mean(df, 0.55, 0.9)["compute"])


def test_combine_is_worker_mean_summed_over_jobs():
    per_job = {
        "a": {"worker0": {"compute": 80, "memory": 2, "tx": 10, "rx": 12},
              "worker1": {"compute": 60, "memory": 4, "tx": 30, "rx": 8}},
        "b": {"worker0": {"compute": 50, "memory": 1, "tx": 0, "rx": 0}},
    }
    combined, means = combine(per_job)
    assert means["a"] == {"compute": 70, "memory": 3, "tx": 20, "rx": 10}
    assert means["b"] == {"compute": 50, "memory": 1, "tx": 0, "rx": 0}
    assert combined == {"compute": 120, "memory": 4, "tx": 20, "rx": 10}
    with pytest.raises(ValueError):
        combine({"a": {}})


class _FakeRaw:
    """Stands for a RawSeries: its own start (ns) and per-target rates on its own time axis."""

    def __init__(self, start_ns, frames):
        self.start_ns, self.frames = start_ns, frames
        self.names = list(frames)

    def rates(self, name):
        return self.frames[name].copy()


def test_measure_aligns_the_jobs_on_one_clock():
    # job a's sampler starts at 1.0 s, job b's at 1.5 s (monotonic); 10 Hz samples
    t = np.round(np.arange(1, 41) * 0.1, 6)
    a = _FakeRaw(1_000_000_000, {"worker0": _frame(t, compute=np.where(t <= 1.5, 100.0, 50.0)),
                                 "worker1": _frame(t, compute=np.full(40, 30.0), tx=np.full(40, 4.0))})
    b = _FakeRaw(1_500_000_000, {"worker0": _frame(t, compute=np.full(40, 20.0), rx=np.full(40, 6.0))})
    per_ranks = {  # measurement windows (monotonic ns): a 2.0..4.5 s, b 2.5..5.0 s -> overlap 2.5..4.5 s
        "a": {"worker0": {"window_ns": [2_000_000_000, 4_000_000_000]},
              "worker1": {"window_ns": [2_100_000_000, 4_500_000_000]}},
        "b": {"worker0": {"window_ns": [2_500_000_000, 5_000_000_000]}, "server0": {"window_ns": [0, 9]}},
    }
    m = measure({"a": a, "b": b}, per_ranks)
    assert m["origin_ns"] == 1_000_000_000
    assert m["overlap_ns"] == (2_500_000_000, 4_500_000_000)
    assert m["overlap_s"] == pytest.approx((1.5, 3.5))
    # job a's worker0 drops to 50 % at 1.5 s, when the overlap starts (its origin is the common one)
    assert m["job_means"]["a"]["compute"] == pytest.approx((50 + 30) / 2)
    assert m["job_means"]["a"]["tx"] == pytest.approx(2.0)  # worker mean: (0 + 4) / 2
    assert m["job_means"]["b"] == pytest.approx({"compute": 20.0, "memory": 0.0, "tx": 0.0, "rx": 6.0})
    assert m["combined"] == pytest.approx({"compute": 60.0, "memory": 0.0, "tx": 2.0, "rx": 6.0})

    per_ranks["b"]["worker0"]["window_ns"] = [4_600_000_000, 5_000_000_000]  # after a ended
    m = measure({"a": a, "b": b}, per_ranks)
    assert m["overlap_ns"] is None and math.isnan(m["combined"]["compute"])


def test_corun_row_and_table(tmp_path):
    from datetime import datetime, timezone

    jobs = [{"job_id": "c-0-x", "base_job_id": "x", "model": "m1"},
            {"job_id": "c-1-y", "base_job_id": "y", "model": "m2"}]
    measured = {"origin_ns": 7, "overlap_ns": (1, 2), "overlap_s": (0.5, 2.5),
                "combined": {"compute": 120.0, "memory": 4.0, "tx": 20.0, "rx": 10.0},
                "job_means": {"c-0-x": {"compute": 70.0}, "c-1-y": {"compute": 50.0}}}
    row = corun_row("c", parse_setting("cpu-ddp-w2-lo"), 6, jobs, measured, "ok", "",
                    datetime(2026, 1, 1, tzinfo=timezone.utc), 12.34567)
    assert row["overlap_s"] == pytest.approx(2.0) and row["compute_mean"] == 120.0
    assert row["job_ids"] == ["c-0-x", "c-1-y"] and row["base_job_ids"] == ["x", "y"]
    assert set(row) == set(corun.CORUN_COLUMNS)
    from driple.cli.collect import format_corun

    text = format_corun({**row, "per_job": {j: {**m, "memory": 1.0, "tx": 2.0, "rx": 3.0}
                                            for j, m in row["per_job"].items()}})
    assert "combined" in text and "120" in text and "0.50..2.50 s" in text and "MB/s" in text
    table = CoRunTable(tmp_path)
    table.append(row)
    table.append({**row, "corun_id": "d", "status": "failed", "reason": "boom"})
    df = table.read()
    assert list(df["corun_id"]) == ["c", "d"] and json.loads(df["job_ids"][0]) == ["c-0-x", "c-1-y"]
    assert json.loads(df["per_job"][0])["c-1-y"]["compute"] == 50.0
    assert table.done_ids() == {"c"}
    table.append({**row, "status": "failed"})  # the last row of a co-run wins
    assert table.done_ids() == set()
    assert not (tmp_path / "results.csv").exists()


def test_ids_are_stable_and_order_sensitive():
    a, b = JobSpec(model="mlp", batch_size=8), JobSpec(model="resnet", batch_size=4)
    assert corun_id([a, b], "cpu-ddp-w2-lo", 6) == corun_id([a, b], "cpu-ddp-w2-lo", 6.0)
    assert corun_id([a, b], "cpu-ddp-w2-lo", 6) != corun_id([b, a], "cpu-ddp-w2-lo", 6)
    assert corun_id([a, b], "cpu-ddp-w2-lo", 6) != corun_id([a, b], "cpu-ddp-w2-lo", 7)
    assert corun_id([a, b], "cpu-ddp-w2-lo", 6).startswith("corun-")


def test_grid_of_coruns(tmp_path):
    path = tmp_path / "pairs.yaml"
    path.write_text(textwrap.dedent("""\
        setting: cpu-ddp-w2-lo
        seconds: 6
        warmup: 3
        coruns:
          - ["resnet,depth=20,bs=32", "mlp,bs=256,opt=adam"]
          - [{model: resnet, knobs: {depth: 20}, batch_size: 32}, {model: gpt_tiny, batch_size: 16}]
        """))
    grid = load_corun_grid(path)
    assert grid["setting"] == "cpu-ddp-w2-lo" and grid["seconds"] == 6 and len(grid["coruns"]) == 2
    first, second = grid["coruns"]
    assert first[0] == JobSpec(model="resnet", batch_size=32, knobs={"depth": 20}, warmup=3)
    assert first[1].optimizer == "adam" and first[1].batch_size == 256
    assert second[0] == first[0]  # both spellings give the same job
    path.write_text("coruns:\n  - [mlp]\n")
    with pytest.raises(DripleError, match="at least two"):
        load_corun_grid(path)
    path.write_text("coruns:\n  - [mlp, 'resnet,bs=zero']\n")
    with pytest.raises(DripleError, match="bs="):
        load_corun_grid(path)


def test_bad_input_fails_before_anything_starts(tmp_path):
    with pytest.raises(DripleError, match="at least two"):
        run_corun([JobSpec(model="mlp")], "cpu-ddp-w2-lo", 2, tmp_path)
    with pytest.raises(DripleError, match="seconds"):
        run_corun([JobSpec(model="a:b"), JobSpec(model="a:b")], "cpu-ddp-w2-lo", 0, tmp_path)
    assert not (tmp_path / "coruns.csv").exists()


# -- supervision, with stand-in collectors ------------------------------------------------------------
# A stand-in reads the co-run's config for its job and behaves as the job's model says:
# fake:ok ends ok at once, fake:crash fails, fake:wait runs until SIGTERM (then "interrupted", as
# the launcher would), fake:stubborn ignores SIGTERM and has a "rank" with its work dir in argv.
FAKE = r"""
import json, signal, subprocess, sys, time
cfg = json.load(open(sys.argv[1]))
kind = cfg["spec"]["model"].split(":")[1]
def finish(status, reason, code=0):
    row = {"job_id": cfg["job_id"], "model": cfg["spec"]["model"], "status": status, "reason": reason}
    json.dump({"row": row, "raw_path": None, "detail_path": None}, open(cfg["result"], "w"))
    sys.exit(code)
if kind == "ok":
    finish("ok", "")
if kind == "crash":
    time.sleep(0.3)
    finish("failed", "worker1 exited with code 1: RuntimeError: boom")
if kind == "wait":
    signal.signal(signal.SIGTERM, lambda *_: finish("failed", "interrupted by Ctrl-C/SIGTERM during the job", 130))
    open(cfg["result"] + ".started", "w").close()
    time.sleep(60)  # WAIT_S
    finish("ok", "")
if kind == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    marker = cfg["out_dir"] + "/raw/" + cfg["job_id"] + ".work/job.json"
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker], start_new_session=True)
    open(cfg["out_dir"] + "/rank.pid", "w").write(str(rank.pid))
    time.sleep(60)
"""


WAIT_S = 60  # how long fake:wait runs unless stopped


@pytest.fixture
def fake_collectors(tmp_path, monkeypatch):
    script = tmp_path / "fake_collector.py"
    script.write_text(FAKE)
    monkeypatch.setattr(corun, "_child_command", lambda config: [sys.executable, str(script), str(config)])
    monkeypatch.setattr(corun, "STOP_GRACE_S", 3.0)
    return tmp_path / "out"


def _no_children_left():
    kids = [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != "zombie"]
    assert kids == [], f"processes left behind: {[p.cmdline()[:4] for p in kids]}"


def _jobs(*kinds):
    return [JobSpec(model=f"fake:{k}") for k in kinds]


def test_a_failed_job_stops_the_others_and_fails_the_corun(fake_collectors):
    out = fake_collectors
    t0 = time.monotonic()
    result = run_corun(_jobs("crash", "wait"), "cpu-ddp-w2-lo", 5, out)
    assert time.monotonic() - t0 < WAIT_S  # the waiting job was stopped, not run to its end
    _no_children_left()
    assert not result.ok
    crashed, stopped = result.jobs
    assert result.row["reason"] == f"job {crashed.job_id} failed: worker1 exited with code 1: RuntimeError: boom"
    assert stopped.row["status"] == "failed" and stopped.row["reason"].startswith("stopped: job ")
    rows = pd.read_csv(out / "results.csv")
    assert list(rows["job_id"]) == [crashed.job_id, stopped.job_id]
    assert set(rows["corun_id"]) == {result.corun_id} and list(rows["corun_job"]) == [0, 1]
    assert rows["base_job_id"][0] == crashed.job_id.split("-0-", 1)[1]
    table = corun.load_coruns(out)
    assert list(table["status"]) == ["failed"] and json.loads(table["job_ids"][0]) == [r.job_id for r in result.jobs]
    assert not list(out.glob(".*.corun"))  # the co-run's scratch directory is gone


def test_jobs_without_series_fail_the_analysis_not_the_corun_machinery(fake_collectors):
    result = run_corun(_jobs("ok", "ok"), "cpu-ddp-w2-lo", 5, fake_collectors)
    assert [r.row["status"] for r in result.jobs] == ["ok", "ok"]
    assert result.row["status"] == "failed" and result.row["reason"].startswith("analysis failed")
    _no_children_left()


def test_sigterm_stops_every_job_and_records_the_corun(fake_collectors):
    out = fake_collectors

    def interrupt_when_started():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(list(out.glob(".*.corun/*.started"))) < 2:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill <driple pid>` would

    threading.Thread(target=interrupt_when_started, daemon=True).start()
    with pytest.raises(CoRunInterrupted) as stop:
        run_corun(_jobs("wait", "wait"), "cpu-ddp-w2-lo", 5, out)
    _no_children_left()
    result = stop.value.result
    assert result.row["status"] == "failed" and result.row["reason"].startswith("interrupted")
    assert [r.row["reason"] for r in result.jobs] == ["interrupted by Ctrl-C/SIGTERM during the job"] * 2
    assert list(corun.load_coruns(out)["status"]) == ["failed"]
    assert len(pd.read_csv(out / "results.csv")) == 2


def test_a_collector_that_will_not_stop_is_killed_with_its_ranks(fake_collectors):
    out = fake_collectors
    result = run_corun(_jobs("crash", "stubborn"), "cpu-ddp-w2-lo", 5, out)
    assert not result.ok
    stubborn = result.jobs[1]
    assert stubborn.row["status"] == "failed" and stubborn.row["reason"].startswith("stopped: job ")
    assert "then killed: collector exited with code -9 without a result" in stubborn.row["reason"]
    _no_children_left()
    # its "rank" ran in a session of its own (as the launcher's do): found by its work dir, killed
    pid = int((out / "rank.pid").read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- one real co-run ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_tiny_ddp_jobs_run_together(tmp_path, tiny_model, host_load):
    """Two 2-worker gloo jobs on loopback at once (4 ranks, 2 samplers on this host)."""

    jobs = [JobSpec(model=tiny_model, batch_size=16, knobs={"width": 256}, warmup=3),
            JobSpec(model=tiny_model, batch_size=32, knobs={"width": 128}, warmup=3)]
    # the jobs start together but reach the end of their warm-up up to seconds apart on a busy
    # host (a CI run: windows that never met); the start gate makes them measure together
    result = run_corun(jobs, "cpu-ddp-w2-lo", seconds=3.0, out_dir=tmp_path, timeout=90, min_overlap_s=0.2)
    _no_children_left()
    row = result.row
    assert result.ok, (row["reason"], [r.row["reason"] for r in result.jobs])
    assert all(r.ok for r in result.jobs) and len({r.row["job_id"] for r in result.jobs}) == 2
    # the overlap is where both jobs' measurement windows (from their workers' details) meet
    windows = [corun.job_window(json.loads(r.detail_path.read_text())["per_rank"]) for r in result.jobs]
    start, end = max(w[0] for w in windows), min(w[1] for w in windows)
    assert row["overlap_s"] == pytest.approx((end - start) / 1e9, abs=1e-5)
    assert row["overlap_s"] <= min(w[1] - w[0] for w in windows) / 1e9 + 1e-6  # row: 6 decimals
    # after the gate both windows start within a few ms: the overlap is the shorter measurement
    assert abs(windows[0][0] - windows[1][0]) < 0.5e9 and row["overlap_s"] >= 0.8 * 3.0
    for r in ("compute", "memory", "tx", "rx"):
        assert row[f"{r}_mean"] == pytest.approx(sum(m[r] for m in row["per_job"].values()))
    assert row["compute_mean"] > 0 and row["tx_mean"] > 0 and row["rx_mean"] > 0

    rows = pd.read_csv(tmp_path / "results.csv")
    assert list(rows["status"]) == ["ok", "ok"] and set(rows["corun_id"]) == {row["corun_id"]}
    for r in result.jobs:
        assert r.raw_path.exists() and r.detail_path.exists()

    runs = read_corun(tmp_path)
    c = runs[row["corun_id"]]
    assert c.job_ids == row["job_ids"] and set(c.series) == set(row["job_ids"])
    assert c.overlap == pytest.approx((row["overlap_start_s"], row["overlap_end_s"]))
    for j, df in c.series.items():  # both on the co-run's clock, both cover the overlap
        assert list(df.columns) == ["compute", "memory", "tx", "rx"]
        assert df.index[0] <= c.overlap[0] and df.index[-1] >= c.overlap[1]
        assert window_mean(df, *c.overlap)["compute"] == pytest.approx(row["per_job"][j]["compute"], rel=1e-6)
    m = measured_combined(c.series, t0=c.overlap[0], t1=c.overlap[1])
    assert m.resources["compute"].combined_mean == pytest.approx(row["compute_mean"], rel=0.15)
    w0 = read_corun(tmp_path, row["corun_id"], worker="worker0")[row["corun_id"]]
    assert set(w0.series) == set(c.series)
    # 4 CPU-bound ranks: well above idle, unless other processes took the cores
    host_load.check(row["compute_mean"] > 20, f"the two jobs used {row['compute_mean']:.0f} % compute")


def test_command_line_prints_the_corun_and_fails_with_it(fake_collectors, capsys):
    from driple.cli import main

    out = fake_collectors
    assert main(["collect", "corun", "fake:crash", "fake:wait", "--seconds", "3", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "status failed" in text and "RuntimeError: boom" in text
    grid = out.parent / "pairs.yaml"
    grid.write_text("seconds: 3\ncoruns:\n  - ['fake:crash', 'fake:ok']\n  - ['fake:ok', 'fake:crash']\n")
    assert main(["collect", "corun", "--grid", str(grid), "--out", str(out), "--json"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["status"] for r in rows] == ["failed", "failed"] and len(corun.load_coruns(out)) == 3
    with pytest.raises(SystemExit):
        main(["collect", "corun", "--help"])
    assert "coruns.csv" in capsys.readouterr().out


def square(t, period_samples, burst_samples, level, offset=0):
    k = np.round(t * 100).astype(int)
    return np.where((k - offset) % period_samples < burst_samples, level, 0.0)


def test_measured_combined_by_hand():
    t = np.arange(201) / 100  # 0 .. 2.00 s at 100 Hz; the grid reads samples 1..200
    x = square(t, 10, 2, 100.0)  # bursts on samples 0, 1 of every 10: duty 0.2
    y = square(t, 10, 5, 200.0)  # samples 0..4: duty 0.5, both burst on 0, 1 -> collision 0.2
    res = measured_combined({"x": {"tx": (t, x)}, "y": {"tx": (t, y)}}, capacity={"tx": 250},
                            thresholds={"x": {"tx": 50.0}, "y": {"tx": 100.0}})
    assert res.n_samples == 200 and res.dt_s == pytest.approx(0.01)
    tx = res.resources["tx"]
    assert list(res.resources) == ["tx"]
    assert tx.combined_mean == pytest.approx(20.0 + 100.0)
    assert tx.duty_cycles == pytest.approx({"x": 0.2, "y": 0.5})
    assert tx.collision_fraction == pytest.approx(0.2)
    assert tx.independent_collision == pytest.approx(0.1)  # the phases were aligned, not random
    assert tx.overload_fraction == pytest.approx(0.2)  # 300 > 250 when both burst
    # thresholds fitted by the labeller (2-means midpoints 50 and 100) give the same answer
    fitted = measured_combined({"x": {"tx": (t, x)}, "y": pd.DataFrame({"tx": y}, index=t)})
    assert fitted.resources["tx"].thresholds == pytest.approx({"x": 50.0, "y": 100.0})
    assert fitted.resources["tx"].collision_fraction == pytest.approx(0.2)
    # a window cut to the first second keeps 100 samples
    assert measured_combined({"x": {"tx": (t, x)}, "y": {"tx": (t, y)}}, t1=1.0).n_samples == 100
    with pytest.raises(DripleError, match="too short"):
        measured_combined({"x": {"tx": (t, x)}, "y": {"tx": (t + 5.0, y)}})
