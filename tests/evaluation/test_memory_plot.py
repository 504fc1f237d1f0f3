"""The memory cycle against a measured job's curve, on a shipped FSDP job (an MLP: traced in a
second): the measured share is the row's label, the simulated one the fit's, and the picture
is written; a job that is not there is refused by name."""
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "v2" / "cpu-fsdp-w2-lo"
FIGURES = ROOT / "trained_models" / "evaluation" / "fsdp" / "memory.json"
JOB = "mlp-bs64-752ca189a6"


def test_a_job_s_curve_and_its_simulated_cycle(tmp_path):
    pytest.importorskip("matplotlib")
    from driple.errors import DripleError
    from driple.evaluation.memory_plot import job_curves, plot_jobs, setting_fit
    from driple.inspector.dataset import read_results

    c = job_curves(str(DATASET), JOB, str(FIGURES))
    row = read_results(str(DATASET / "results.csv"), 10.0).set_index("job_id").loc[JOB]
    assert c["measured"]["share"] == pytest.approx(
        row["memory_burst_duration"] / (row["memory_burst_duration"] + row["memory_idle_duration"]))
    m, s = c["measured"], c["simulated"]
    assert np.all(np.diff(m["times"]) >= 0) and 0 <= m["times"][0] and m["times"][-1] <= 1
    assert len(s["times"]) == len(s["mb"]) and s["mb"].min() == pytest.approx(m["mb"].min())  # over the measured low
    assert 0 < s["share"] < 1 and 0 < s["tail"] < 1 and m["collectives"]  # FSDP waits in its collectives
    fit, f_s, b_s = setting_fit("cpu-fsdp-w2-lo", str(FIGURES))
    assert fit.comm and f_s > 0 and b_s > 0
    out = plot_jobs([c], str(tmp_path / "cycle.png"))
    assert Path(out).stat().st_size > 10_000
    with pytest.raises(DripleError, match="no job nothing"):
        job_curves(str(DATASET), "nothing", str(FIGURES))
    with pytest.raises(DripleError, match="no memory cycle fitted for cpu-xyz"):
        setting_fit("cpu-xyz", str(FIGURES))
