"""``driple.evaluation.colocate`` (``scripts/eval_colocate.py`` prints it): the capacity a co-run
on this host really shares, the memory unit of its measurements, and the confusion table of
predicted against measured fit."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    from driple.evaluation import colocate

    return colocate


def test_corun_capacity_splits_the_host_between_all_ranks(script):
    lo = script.corun_capacity("cpu-ddp-w2-lo", host_cores=2)
    assert lo["compute"] == pytest.approx(100.0)  # 2 cores, 2 ranks: one core a slot
    ddp_1g = script.corun_capacity("cpu-ddp-w2-1g", host_cores=2)
    assert ddp_1g["compute"] == pytest.approx(100.0)  # namespaces do not add cores
    assert "tx" not in ddp_1g and "rx" not in ddp_1g  # each co-run job has links of its own
    ps = script.corun_capacity("cpu-ps-p1w2-1g", host_cores=2)
    assert ps["compute"] == pytest.approx(100.0)  # workers pair up one per slot; servers not modelled


def test_measured_memory_in_the_amount_unit(script, tmp_path):
    from driple.metrics import DECLARED_LABELS, use_labels

    (tmp_path / "provenance.json").write_text('{"host": {"memory_bytes": 8e9}}')
    try:
        use_labels("v1")
        assert script.measured_memory_scale(str(tmp_path)) == 1.0  # labels v1: % of host memory
        use_labels("v2")
        assert script.measured_memory_scale(str(tmp_path)) == pytest.approx(80.0)  # 1 % = 80 MB
    finally:
        use_labels(DECLARED_LABELS)


def _row(verdict, slowdowns, name="inspector"):
    return {"models": ["a", "b"], "slowdown": slowdowns, name: {"verdict": verdict}}


def test_confusion_counts_each_pair_once(script):
    rows = [_row("packs well", [1.02, 1.10]),   # fits, predicted fits
            _row("packs well", [1.02, 1.40]),   # one job slowed: does not fit
            _row("contends", [1.05, 1.01]),     # fits, predicted not
            _row("does not fit", [2.0, 1.9]),   # slowed, predicted not
            _row("does not fit", [2.0]),        # one solo run missing: left out
            {"models": ["a", "b"], "slowdown": [1.0, 1.0]}]  # no prediction: left out
    table = script.confusion(rows, "inspector", max_slowdown=1.15)
    assert table == {"fit_predicted_fit": 1, "fit_predicted_not": 1,
                     "not_predicted_fit": 1, "not_predicted_not": 1}
    assert script.confusion(rows, "inspector", max_slowdown=1.5)["fit_predicted_fit"] == 2
    text = "\n".join(script.format_confusion(table, "inspector"))
    assert "measured fits" in text and "measured slowed" in text
