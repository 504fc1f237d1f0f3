"""Every row names its machine: its own spec, else its dataset's recorded figures, else refused."""
import json

import pandas as pd
import pytest

from driple.errors import DripleError
from driple.hardware.rows import dataset_specs, machines, recorded_spec, training_machine_spec


def spec_json(cpu, flops):
    return json.dumps({"version": 1, "cpu_model": cpu, "matmul_flops_per_s": {"float32": flops},
                       "copy_bytes_per_s": 1e10})


def test_rows_take_their_own_spec_else_the_recorded_figures(tmp_path):
    (tmp_path / "provenance.json").write_text(json.dumps({"host_speed": {
        "flops_per_s": 2e11, "memory_bytes_per_s": 2.5e10, "cpu_model": "Intel", "how": "measured"}}))
    frame = pd.DataFrame({"job_id": ["a", "b"], "hardware": [spec_json("AMD", 1e11), float("nan")]})
    a, b = dataset_specs(frame, tmp_path)
    assert (a.cpu_model, a.flops_per_s) == ("AMD", 1e11)
    assert (b.cpu_model, b.flops_per_s) == ("Intel", 2e11) and "provenance.json" in b.how
    assert machines([a, b, b]) == [{"cpu_model": "Intel", "gpus": [], "rows": 2},
                                   {"cpu_model": "AMD", "gpus": [], "rows": 1}]


def test_a_training_set_without_recorded_figures_is_described_by_its_rows_median_probe(tmp_path):
    pd.DataFrame({"job_id": ["a", "b", "c", "d"],
                  "hardware": [spec_json("AMD", 1e11), spec_json("AMD", 3e11), spec_json("AMD", 2e11),
                               float("nan")]}).to_csv(tmp_path / "results.csv", index=False)
    spec = training_machine_spec(tmp_path)
    assert (spec.cpu_model, spec.flops_per_s) == ("AMD", 2e11) and "median of the probes of 3 rows" in spec.how
    assert training_machine_spec(tmp_path, jobs=["a", "b"]).flops_per_s == 2e11
    assert training_machine_spec(tmp_path, jobs=["a"]).flops_per_s == 1e11
    assert training_machine_spec(tmp_path, jobs=["d"]) is None
    assert training_machine_spec(tmp_path / "nowhere") is None


def test_a_row_without_a_spec_is_refused_by_its_job_id(tmp_path):
    frame = pd.DataFrame({"job_id": ["resnet-bs32-x"], "model": ["resnet"]})
    assert recorded_spec(tmp_path) is None
    with pytest.raises(DripleError, match="job resnet-bs32-x of .* names no machine"):
        dataset_specs(frame, tmp_path)


def test_a_garbled_spec_is_refused_by_its_job_id(tmp_path):
    frame = pd.DataFrame({"job_id": ["j1"], "hardware": ["{oops"]})
    with pytest.raises(DripleError, match="job j1: its hardware spec is not JSON"):
        dataset_specs(frame, tmp_path)


def test_shipped_datasets_each_name_their_machine():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "datasets"
    for d in ("v2/cpu-ddp-w2-lo", "v2/cpu-ps-p1w2-1g", "v2-intel/cpu-ps-p1w2-1g"):
        frame = pd.read_csv(root / d / "results.csv")
        specs = dataset_specs(frame, root / d)
        assert len(specs) == len(frame) and all(s.flops_per_s > 0 for s in specs)
