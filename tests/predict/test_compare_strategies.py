"""One job under every strategy: the rows, the verdicts and the command's refusals."""
import json

import pytest

from driple.cli import main
from driple.predict.compare import compare_strategies, strategy_settings, verdicts


def test_every_strategy_gets_a_setting_on_the_network():
    lo = strategy_settings("lo")
    assert lo["ddp"] == "cpu-ddp-w2-lo" and lo["fsdp"] == "cpu-fsdp-w2-lo" and lo["ps"] == "cpu-ps-p1w2-lo"
    assert strategy_settings("1g")["ps"] == "cpu-ps-p1w2-1g"


def test_rows_follow_each_strategys_memory_and_traffic():
    rows = {r["strategy"]: r for r in compare_strategies("mlp", batch_size=8, optimizer="adam")}
    ddp, fsdp, ps = rows["ddp"], rows["fsdp"], rows["ps"]
    # FSDP over gloo moves two gathers of (W-1)/W and an all-reduce-sized reduce-scatter,
    # 2 x (W-1)/W, of each unit per step, a ring all-reduce 2 x (W-1)/W: 2x
    assert fsdp["tx_mb_per_step"] == pytest.approx(2.0 * ddp["tx_mb_per_step"], rel=0.01)
    # Adam's two moments and the gradients, halved over two workers; no gradient-bucket copy
    assert fsdp["memory_peak_mb"] < ddp["memory_peak_mb"]
    assert fsdp["memory_breakdown_mb"]["optimizer_state"] == pytest.approx(
        ddp["memory_breakdown_mb"]["optimizer_state"] / 2, rel=0.01)
    assert ps["memory_breakdown_mb"]["optimizer_state"] == 0  # the server steps
    for shipped in (ddp, fsdp):  # shipped inspectors on loopback: step time and memory per rank
        assert shipped["step_time_s"] > 0 and shipped["measured_on"] == "AMD EPYC"
        low, high = shipped["memory_interval_mb"]
        assert low <= shipped["memory_mb"] <= high and shipped["memory_mb"] > 100  # the runtime's part too
    assert ps["step_time_s"] is None and ps["memory_mb"] is None and "no shipped inspector" in ps["note"]


def test_verdicts_name_the_fastest_and_the_smallest():
    rows = [{"strategy": "a", "step_time_s": 2.0, "memory_peak_mb": 5.0, "memory_mb": 300.0, "measured_on": "x"},
            {"strategy": "b", "step_time_s": 1.0, "memory_peak_mb": 9.0, "memory_mb": 200.0, "measured_on": "y"},
            {"strategy": "c", "step_time_s": None, "memory_peak_mb": 1.0, "memory_mb": None}]
    assert verdicts(rows) == {"fastest": "b", "least_memory": "c", "least_memory_predicted": "b",
                              "same_machine": False}
    assert verdicts(rows[1:])["least_memory_predicted"] is None  # one predicted memory compares nothing


def test_command_prints_a_table_and_json(capsys):
    assert main(["compare-strategies", "mlp", "--batch-size", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["strategy"] for r in out["rows"]} >= {"ddp", "fsdp", "ps"} and out["least_memory"]
    assert out["least_memory_predicted"] in ("ddp", "fsdp")
    assert main(["compare-strategies", "mlp", "--batch-size", "8"]) == 0
    text = capsys.readouterr().out
    assert "fsdp" in text and "least memory per rank, predicted" in text and "least simulated peak" in text


@pytest.mark.parametrize("argv, words", [
    (["compare-strategies", "mlp", "--network", "5x"], "unknown network '5x'"),
    (["compare-strategies", "no_such_model"], "no_such_model"),
    (["predict", "mlp", "--strategy", "zz"], "unknown strategy 'zz'"),
    (["predict", "mlp", "--strategy", "ddp", "--setting", "cpu-ddp-w2-lo"], "not both"),
])
def test_bad_requests_are_refused_in_words(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
