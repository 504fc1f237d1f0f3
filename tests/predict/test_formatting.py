"""The one number formatter and the texts built with it (values worked out by hand)."""
from driple.metrics import TARGETS
from driple.predict.formatting import (
    format_amount,
    format_duration,
    format_number,
    format_percent,
    format_profile,
)
from driple.predict.profile import ResourceProfile


def test_numbers_have_three_significant_digits_and_no_exponent_above_1000():
    assert [format_number(x) for x in (0, 1314.4, 410.2, 97.54, 2.483, 0.012345, -3.14159)] == [
        "0", "1314", "410", "97.5", "2.48", "0.0123", "-3.14"]
    assert format_amount(116.2, "%") == "116%" and format_amount(1314.4, "MB/s") == "1314 MB/s"
    assert [format_percent(f) for f in (0.35, 0.004, 0.0, 1.0)] == ["35%", "0.4%", "0%", "100%"]
    assert [format_duration(s) for s in (0.12, 0.0095, 1.534)] == ["120 ms", "9.5 ms", "1.53 s"]


def test_table_and_caveats_write_a_value_the_same_way():
    values = dict.fromkeys(TARGETS, 0.5)
    values.update(tx_burst_amount=1314.4, tx_burst_duration=0.0291)
    prof = ResourceProfile("cpu-ddp-w2-lo", "job", values,
                           intervals={m: (v / 2, v * 2) for m, v in values.items()}, nominal_coverage=0.9,
                           notes=["tx_burst_amount 1314 lies outside the training jobs' range"])
    text = format_profile(prof, {"trained": "by hand", "scores": {"interval_coverage": 0.91}})
    lines = text.splitlines()
    assert lines[:2] == ["job -- setting cpu-ddp-w2-lo", "inspector: by hand"]
    hw = format_profile(prof, {"trained": "by hand", "hardware": "AMD EPYC"}).splitlines()[0]
    assert hw == "job -- setting cpu-ddp-w2-lo (measured on AMD EPYC)"
    tx = next(line for line in lines if line.startswith("tx "))
    assert "1314 MB/s [657, 2629]" in tx and "0.0291 s [0.0146, 0.0582]" in tx
    assert "[low, high]: 90% prediction interval (split conformal; measured coverage 91% on held-out jobs)" in lines
    assert "  - tx_burst_amount 1314 lies outside the training jobs' range" in lines
    assert "e+0" not in text


def test_a_wide_throughput_cell_keeps_its_space():
    from driple.metrics import DECLARED_LABELS, target_names, use_labels

    try:
        use_labels("v2")
        values = dict.fromkeys(target_names(), 0.5)
        values["step_time"] = 0.001
        prof = ResourceProfile("cpu-ddp-w2-lo", "job", values, batch_size=4,
                               intervals={"step_time": (0.0005, 0.002)}, nominal_coverage=0.9)
        row = next(line for line in format_profile(prof).splitlines() if line.startswith("throughput"))
        assert row.startswith("throughput 8000 samples/s [4000, 16000]")  # 2 workers x 4 / 1 ms
    finally:
        use_labels(DECLARED_LABELS)


def test_wide_metric_cells_keep_a_space_between_them():
    """A burst amount and its interval wider than the 27-character column (an LSTM tagger's TX:
    '371 MB/s [294, 569]' then '0.00574 s [0.00331, 0.00776]', 28 characters) stay apart."""
    values = dict.fromkeys(TARGETS, 0.5)
    values.update(tx_burst_amount=371.0, tx_burst_duration=0.00574)
    intervals = {m: (v, v) for m, v in values.items()}
    intervals.update(tx_burst_amount=(294.0, 569.0), tx_burst_duration=(0.00331, 0.00776))
    prof = ResourceProfile("cpu-ddp-w2-lo", "job", values, intervals=intervals, nominal_coverage=0.9)
    tx = next(line for line in format_profile(prof).splitlines() if line.startswith("tx "))
    assert "371 MB/s [294, 569] 0.00574 s [0.00331, 0.00776]" in tx
