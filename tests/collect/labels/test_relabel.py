"""Labels are reproducible from a job's raw files (and a changed one is caught), for both labellers.

Uses the session's real DDP job (see conftest ``ddp_job``).
"""
import csv
import shutil

import pytest

from driple.cli import main
from driple.collect.labels.relabel import check_dataset, columns_of, relabel_job

pytestmark = pytest.mark.slow  # needs the real DDP job of the session


@pytest.fixture
def job_copy(ddp_job, tmp_path):
    out, result = ddp_job
    shutil.copytree(out, tmp_path / "ds")
    root = tmp_path / "ds"
    with open(root / "results.csv") as f:
        rows = list(csv.DictReader(f))
    return root, rows


@pytest.mark.parametrize("labeller", ["timeline", "kmeans"])
def test_labels_are_reproduced_exactly(job_copy, labeller):
    root, rows = job_copy
    again = relabel_job(root, rows[0]["job_id"], labeller)
    columns = columns_of(labeller)
    assert len(columns) == (13 if labeller == "timeline" else 12)
    assert [again[m] for m in columns] == [float(rows[0][m]) for m in columns]
    report = check_dataset(root, progress=False, labeller=labeller)
    assert report == {"jobs": 1, "identical": 1, "mismatched": [], "errors": {}}
    assert main(["collect", "relabel", str(root), "--no-progress", "--labeller", labeller]) == 0


def test_a_changed_label_or_a_damaged_timeline_is_reported(job_copy, capsys):
    root, rows = job_copy
    rows[0]["tx_burst_amount"] = str(float(rows[0]["tx_burst_amount"]) * 1.01)
    with open(root / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    report = check_dataset(root, progress=False)
    assert [m["metric"] for m in report["mismatched"]] == ["tx_burst_amount"]
    assert main(["collect", "relabel", str(root), "--no-progress"]) == 1
    assert "tx_burst_amount" in capsys.readouterr().out
    # a truncated timeline file: one line saying so, not a traceback
    tl = root / "raw" / f"{rows[0]['job_id']}.timeline.npz"
    tl.write_bytes(tl.read_bytes()[:200])
    report = check_dataset(root, progress=False)
    (reason,) = report["errors"].values()
    assert "is not a readable timeline" in reason and "\n" not in reason
    tl.unlink()
    report = check_dataset(root, progress=False)
    assert "is missing" in report["errors"][rows[0]["job_id"]]


def test_write_puts_recomputed_labels_into_the_table(job_copy):
    root, rows = job_copy
    rows[0]["compute_burst_duration"] = "123.0"  # as if measured with an older definition
    rows[0]["kmeans_tx_burst_amount"] = "-1"
    with open(root / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert check_dataset(root, progress=False)["mismatched"]
    assert main(["collect", "relabel", str(root), "--no-progress", "--write"]) == 0
    for labeller in ("timeline", "kmeans"):
        assert check_dataset(root, progress=False, labeller=labeller)["identical"] == 1
