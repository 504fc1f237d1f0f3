import math

import pytest

from driple.errors import DripleError
from driple.inspector.noise import floor_check, noise_floor, other_session_dirs, retest_dir
from driple.metrics import METRICS, use_labels


def write(root, jobs: dict, extra_column: str = ""):
    """results.csv with one ok row per job: compute_burst_amount given, every other metric 1."""
    root.mkdir(parents=True)
    header = ["job_id", "setting", "model", "knobs", "batch_size", "optimizer", "status", *METRICS]
    if extra_column:
        header.append(extra_column)
    lines = [",".join(header)]
    for job, value in jobs.items():
        values = [str(value) if m == "compute_burst_amount" else "1" for m in METRICS]
        lines.append(",".join([job, "cpu-ddp-w2-lo", "mlp", "{}", "8", "sgd", "ok", *values]
                              + (["3"] if extra_column else [])))
    (root / "results.csv").write_text("\n".join(lines) + "\n")
    return str(root)


def test_noise_floor_by_hand(tmp_path):
    use_labels("v1")  # hand-written tables without a labeller column are read as labels v1
    first = write(tmp_path / "S", {"j1": 100, "j2": 50, "j3": 10}, extra_column="step_time")
    again = write(tmp_path / "S-retest", {"j1": 110, "j2": 50, "j4": 7})
    assert retest_dir(first) == again and retest_dir(again) is None
    assert other_session_dirs(first) == []
    later = write(tmp_path / "S-retest-day2", {"j1": 120})
    (tmp_path / "S-retest-empty").mkdir()  # no results.csv: not a run
    assert other_session_dirs(first) == [later] and retest_dir(first) == again
    floor = noise_floor(first, again, [*METRICS, "step_time"])
    assert floor["jobs"] == ["j1", "j2"]  # j3 was not measured again, j4 not at first
    e = floor["labels"]["compute_burst_amount"]
    # measured = retest (110, 50), predicted = first (100, 50)
    assert e["nrmse"] == pytest.approx(math.sqrt((10 ** 2 + 0) / 2) / 80)
    assert e["mape"] == pytest.approx(100 * (10 / 110) / 2)
    assert e["n"] == 2
    assert floor["labels"]["memory_burst_amount"] == {"nrmse": 0.0, "mape": 0.0, "n": 2}
    assert floor["labels"]["step_time"] == {"nrmse": None, "mape": None, "n": 0}  # not in the retest

    with pytest.raises(DripleError, match="not a retest"):
        noise_floor(first, write(tmp_path / "other", {"x": 1}))


def test_floor_check_by_hand():
    floor = {"labels": {"a": {"nrmse": 0.1}, "b": {"nrmse": 0.1}, "c": {"nrmse": None}}}
    scores = {"gnn": {"a": {"nrmse": 0.25}, "b": {"nrmse": 0.15}, "c": {"nrmse": 0.3}},
              "hgb": {"a": {"nrmse": 0.21}, "b": {"nrmse": None}, "c": {"nrmse": 0.2}}}
    check = floor_check(scores, floor)
    assert check["a"] == {"floor": 0.1, "best": "hgb", "error": 0.21, "ratio": pytest.approx(2.1),
                          "within": False}
    assert check["b"]["best"] == "gnn" and check["b"]["within"] is True
    assert check["c"] == {"floor": None, "best": "hgb", "error": 0.2, "ratio": None, "within": None}
