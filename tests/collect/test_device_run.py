"""The lent-machine path, dry-run on the CPU: a chunk measured until its deadline, packed into
at most 8 files, landed, and the next chunk resuming after it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from driple.collect.device_run import MAX_FILES, land, pack, stratified_grid
from driple.errors import DripleError

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = Path(__file__).resolve().parent / "conftest.py"


def test_stratified_grid_takes_families_in_turn(tmp_path):
    src = tmp_path / "g.yaml"
    src.write_text(yaml.safe_dump({"seconds": 3, "jobs": [
        {"model": m, "batch_size": b} for m, b in [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 1), ("c", 2)]]}))
    doc = stratified_grid(src, "gpu-ddp-w1-lo")
    assert [(j["model"], j["batch_size"]) for j in doc["jobs"]] == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("c", 2), ("a", 3)]
    assert doc["setting"] == "gpu-ddp-w1-lo" and doc["seconds"] == 3


def test_land_refuses_a_folder_without_a_chunk(tmp_path):
    with pytest.raises(DripleError, match="no readable chunk.json"):
        land(tmp_path, tmp_path / "dest")


def test_pack_refuses_more_files_than_come_back(tmp_path, monkeypatch):
    import driple.collect.device_run as device_run

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "results.csv").write_text("job_id,status\nj1,ok\n")
    (tmp_path / "work" / "raw").mkdir()
    (tmp_path / "work" / "raw" / "j1.npz").write_bytes(os.urandom(1_000_000))  # incompressible
    monkeypatch.setattr(device_run, "MAX_FILE_BYTES", 64 * 1024)
    with pytest.raises(DripleError, match="over the 8 files"):
        pack(tmp_path / "work", tmp_path / "out", ["j1"])


def test_dry_run_chunk_lands_and_the_next_chunk_resumes(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"setting": "gpu-ddp-w1-lo", "seconds": 2, "warmup": 2, "min_iterations": 5,
                                    "jobs": [{"model": f"{WORKLOADS}:tiny_mlp", "batch_size": 16, "knobs": {"width": 64}}]}))
    datasets, out = tmp_path / "datasets", tmp_path / "out"
    script = [sys.executable, str(ROOT / "scripts" / "device_collect.py")]
    run = script + ["run", "--dry-run", "--grid", str(grid), "--datasets", str(datasets), "--minutes", "1",
                    "--max-seconds", "30", "--out", str(out)]
    first = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    said = json.loads(first.stdout.strip().splitlines()[-1])
    assert said["setting"] == "cpu-ddp-w1-lo" and said["new_rows"] == 1 and said["remaining"] == 0
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= MAX_FILES and "chunk.json" in files
    chunk = json.loads((out / "chunk.json").read_text())
    assert chunk["spec"]["version"] == 1 and chunk["rows"] == 1
    landed = subprocess.run(script + ["land", str(out), "--datasets", str(datasets)], capture_output=True, text=True)
    assert landed.returncode == 0 and "1 rows added" in landed.stdout, landed.stderr
    dest = datasets / "gpu-cpu" / "cpu-ddp-w1-lo"
    import pandas as pd

    rows = pd.read_csv(dest / "results.csv")
    assert list(rows["status"]) == ["ok"] and json.loads(rows["hardware"][0])["version"] == 1
    assert any((dest / "raw").glob("*.npz")) and json.loads((dest / "provenance.json").read_text())["device_chunks"]
    for f in out.iterdir():
        f.unlink()
    again = subprocess.run(run, capture_output=True, text=True, timeout=300)  # resumes: nothing left
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["new_rows"] == 0
