"""The shipped catalogues: measured and predicted profiles of every job, the slot's capacity, the split."""
from __future__ import annotations

import pytest

from driple.errors import DripleError
from driple.schedule.catalogue import held_out, load_catalogue


@pytest.mark.parametrize("setting, jobs", [("cpu-ddp-w2-1g", 151), ("cpu-ps-p1w2-1g", 172)])
def test_shipped_catalogues(setting, jobs):
    cat = load_catalogue(setting)
    assert (cat.setting, len(cat)) == (setting, jobs)
    # a 2-core host shared by 2 workers: one core and half the memory per slot
    assert cat.capacity["compute"] == pytest.approx(100.0)
    assert 12000 < cat.capacity["memory"] < 13000
    job = cat.jobs[0]
    assert job.measured.metrics.keys() == job.predicted.metrics.keys()
    assert job.measured.resident == job.predicted.resident
    kept = held_out(cat)
    assert 0 < len(kept) < len(cat) and {j.split for j in kept.jobs} == {"val", "test"}


def test_unknown_catalogue_names_the_shipped_ones(tmp_path):
    with pytest.raises(DripleError, match="shipped: cpu-ddp-w2-1g, cpu-ps-p1w2-1g"):
        load_catalogue("gpu-ddp-w4-10g")
    bad = tmp_path / "c.json"
    bad.write_text("{\"format\": \"other\"}")
    with pytest.raises(DripleError, match="is not a driple-schedule-catalogue/1 file"):
        load_catalogue(str(bad))
