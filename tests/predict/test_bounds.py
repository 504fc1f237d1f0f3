"""Physical caps and extrapolation notes on hand-made predictions."""
import numpy as np
import pytest

from driple.inspector.scaling import TargetScaler
from driple.metrics import TARGETS
from driple.predict.bounds import bound, caps, floors

I = {m: j for j, m in enumerate(TARGETS)}


def _row(**vals):
    row = np.ones(len(TARGETS))
    for k, v in vals.items():
        row[I[k]] = v
    return row


def test_caps_follow_the_setting():
    high = _row(compute_burst_amount=116.0)
    # labels v2: memory's amount (MB) is capped by the host's memory, when it is known
    assert caps("cpu-ddp-w2-lo", high) == {"compute_burst_amount": 116.0}
    assert caps("cpu-ddp-w2-lo", high, host_memory_mb=8000) == {"memory_burst_amount": 8000.0,
                                                                "compute_burst_amount": 116.0}
    assert caps("cpu-ddp-w2-1g", high)["tx_burst_amount"] == pytest.approx(125.0)  # 1 Gbit/s in MB/s
    assert caps("gpu-ddp-w4-10g")["compute_burst_amount"] == 100.0
    assert caps("gpu-ddp-w4-10g")["rx_burst_amount"] == pytest.approx(1250.0)
    assert "compute_burst_amount" not in caps("cpu-ddp-w2-lo")  # no training range: no CPU cap


def test_amounts_are_clipped_and_extrapolations_noted():
    low, high = _row(compute_burst_amount=45.0) * 0.5, _row(compute_burst_amount=116.0) * 2
    values = np.vstack([_row(compute_burst_amount=141.0, tx_burst_amount=300.0, tx_idle_duration=-0.1),
                        _row(compute_burst_amount=90.0)])
    out, notes = bound(values, "cpu-ddp-w2-1g", low, high)
    assert out[0, I["compute_burst_amount"]] == 141.0  # within this training range (cap 232)
    assert out[0, I["tx_burst_amount"]] == pytest.approx(125.0)  # the link's rate
    assert out[0, I["tx_idle_duration"]] == 0.5  # raised to the shortest training value
    assert any("tx_idle_duration" in n and "shown as 0.5" in n for n in notes[0])
    assert any("tx_burst_amount" in n and "clipped" in n for n in notes[0])
    assert any("tx_burst_amount" in n and "outside" in n for n in notes[0])
    assert notes[1] == [] and np.array_equal(out[1], values[1])
    assert values[0, I["tx_burst_amount"]] == 300.0  # the input is not changed


def test_cpu_compute_is_capped_at_the_training_maximum():
    y = np.vstack([_row(compute_burst_amount=45.0), _row(compute_burst_amount=116.0)])
    ts = TargetScaler("max").fit(y)
    again = TargetScaler.from_dict(ts.to_dict())  # the range travels in the checkpoint
    assert again.low_[I["compute_burst_amount"]] == 45.0 and again.high_[I["compute_burst_amount"]] == 116.0
    out, notes = bound(_row(compute_burst_amount=141.0)[None], "cpu-ddp-w2-lo", again.low_, again.high_)
    assert out[0, I["compute_burst_amount"]] == 116.0
    assert len(notes[0]) == 2  # outside the range, and clipped
    assert TargetScaler.from_dict({"method": "max", "center": [0] * len(TARGETS),
                                   "scale": [1] * len(TARGETS)}).high_ is None


def test_floors_are_the_shortest_training_durations():
    low = _row(compute_burst_duration=0.01, tx_idle_duration=np.nan)
    f = floors(low)
    assert f["compute_burst_duration"] == 0.01 and "tx_idle_duration" not in f
    assert not any(m.endswith("_amount") for m in f) and floors(None) == {}
