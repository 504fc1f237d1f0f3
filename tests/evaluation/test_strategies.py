"""Predicted against measured order of two strategies, judged by hand."""
from driple.evaluation.strategies import judge


def test_agreeing_and_disagreeing_orders():
    v = judge((1.0, 2.0), (1.5, 1.8), ("ddp", "fsdp"))
    assert v["measured_lower"] == v["predicted_lower"] == "ddp" and v["agrees"] and not v["tie"]
    v = judge((2.0, 1.0), (1.5, 1.8), ("ddp", "fsdp"))
    assert v["measured_lower"] == "fsdp" and v["predicted_lower"] == "ddp" and not v["agrees"]


def test_a_difference_within_the_noise_is_a_tie():
    assert judge((100.0, 104.0), (1, 2), ("a", "b"), tie=0.05)["tie"]
    assert not judge((100.0, 106.0), (1, 2), ("a", "b"), tie=0.05)["tie"]
