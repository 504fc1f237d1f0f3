"""The shipped labels are reproducible from the shipped raw series (and a changed one is caught)."""
import csv
import shutil
from pathlib import Path

import pytest

from driple.cli import main
from driple.collect.relabel import check_dataset, relabel_job
from driple.metrics import METRICS

SHIPPED = Path(__file__).resolve().parents[2] / "datasets" / "cpu-ddp-w2-lo"


def _first_ok_rows(n):
    with open(SHIPPED / "results.csv") as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}  # last row per job counts
    return [r for r in rows.values() if r["status"] == "ok"][:n]


@pytest.fixture
def small_dataset(tmp_path):
    rows = _first_ok_rows(2)
    (tmp_path / "raw").mkdir()
    for r in rows:
        for ext in ("npz", "json"):
            shutil.copy(SHIPPED / "raw" / f"{r['job_id']}.{ext}", tmp_path / "raw")
    with open(tmp_path / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return tmp_path, rows


def test_shipped_labels_are_reproduced_exactly(small_dataset):
    root, rows = small_dataset
    for r in rows:
        again = relabel_job(root, r["job_id"])
        assert [again[m] for m in METRICS] == [float(r[m]) for m in METRICS]
    report = check_dataset(root, progress=False)
    assert report == {"jobs": 2, "identical": 2, "mismatched": [], "errors": {}}
    assert main(["collect", "relabel", str(root), "--no-progress"]) == 0


def test_a_changed_label_or_missing_series_is_reported(small_dataset, capsys):
    root, rows = small_dataset
    rows[0]["tx_burst_amount"] = str(float(rows[0]["tx_burst_amount"]) * 1.01)
    with open(root / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (root / "raw" / f"{rows[1]['job_id']}.npz").unlink()
    report = check_dataset(root, progress=False)
    assert [m["metric"] for m in report["mismatched"]] == ["tx_burst_amount"]
    assert list(report["errors"]) == [rows[1]["job_id"]]
    assert main(["collect", "relabel", str(root), "--no-progress"]) == 1
    assert "tx_burst_amount" in capsys.readouterr().out
