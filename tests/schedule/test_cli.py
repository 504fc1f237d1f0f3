"""`driple simulate` through main([...]): figures, JSON, plot, and one-line errors with exit 2."""
from __future__ import annotations

import json

from driple.cli import main


def test_simulate_prints_every_policy_and_the_oracle_gain(capsys, tmp_path):
    plot = tmp_path / "jct.png"
    assert main(["simulate", "--trace", "synthetic:60", "--nodes", "4", "--load", "0.8", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    for name in ("fifo", "random", "driple", "oracle", "avg JCT", "p99 JCT", "makespan", "oracle gain"):
        assert name in out
    assert "synthetic" in out and plot.stat().st_size > 0


def test_simulate_json_with_noise_levels(capsys):
    assert main(["simulate", "--trace", "synthetic:40", "--nodes", "4", "--policy", "driple",
                 "--noise", "0,0.25", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["noise"] for r in runs] == [0.0, 0.25]
    assert set(runs[0]["policies"]) == {"fifo", "driple", "oracle"}  # the baselines always run
    assert {"avg_jct_s", "p99_jct_s", "makespan_s", "utilisation", "violations",
            "oracle_gain_share"} <= set(runs[0]["policies"]["driple"])


def test_unknown_policy_is_one_line_exit_2(capsys):
    assert main(["simulate", "--trace", "synthetic:10", "--policy", "sjf"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "driple: error: unknown policy 'sjf'; choose from fifo, random, driple, oracle"


def test_malformed_trace_is_one_line_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,arrival_s,gpus,duration_s\nj1,0,one,10\n")
    assert main(["simulate", "--trace", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("driple: error: ") and "line 2" in err and len(err.strip().splitlines()) == 1
    assert main(["simulate", "--trace", str(tmp_path / "missing.csv")]) == 2
    assert "no trace file" in capsys.readouterr().err


def test_several_seeds_are_averaged(capsys):
    assert main(["simulate", "--trace", "synthetic:30", "--nodes", "4", "--seeds", "0,1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs"]) == 2 and out["means"][0]["policies"]["fifo"]["runs"] == 2


def test_unknown_catalogue_setting_is_one_line_exit_2(capsys):
    assert main(["simulate", "--trace", "synthetic:10", "--catalogue", "gpu-ddp-w4-10g"]) == 2
    assert "no shipped catalogue for setting 'gpu-ddp-w4-10g'" in capsys.readouterr().err


def test_check_interference_prints_the_median_error(capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "datasets"
    assert main(["simulate", "--check-interference", "--datasets", str(root)]) == 0
    out = capsys.readouterr().out
    assert "24 measured co-run pairs (48 slow-downs)" in out and "leave one pair out: median error" in out
    assert main(["simulate", "--check-interference", "--datasets", str(root / "nowhere")]) == 2
    assert "no measured co-run" in capsys.readouterr().err
