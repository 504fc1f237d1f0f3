"""The shipped inspectors (``trained_models/``) keep reading graphs grouped as when they were trained.

They were saved by driple 0.1.0, before a checkpoint recorded the grouping seed; the seed then
was 42. Whatever the builder's defaults become, their graphs must still be grouped with it.
"""
import pytest

from driple.predict.predictor import Predictor

SHIPPED = ("cpu-ddp-w2-1g", "cpu-ddp-w2-lo", "cpu-ps-p1w2-1g")

# The default inspector's prediction for ResNet-20, batch 32, written down before the seed was
# recorded (inspector sha256 a74caab16bef...). Reshipping it means writing down its new values.
RESNET20_SHA256 = "a74caab16bef739a9172c7517bbbe43d1304fb8ef8add8baa7d2e3b0cc430a6a"
RESNET20_B32 = {
    "compute_burst_amount": 97.91233250771757, "compute_burst_duration": 0.23765337902624672,
    "compute_idle_duration": 0.028293544584749863, "memory_burst_amount": 1.5920031166974127,
    "memory_burst_duration": 0.13245958411918224, "memory_idle_duration": 0.07041158220090793,
    "tx_burst_amount": 60.73017530446032, "tx_burst_duration": 0.010186363822489719,
    "tx_idle_duration": 0.19342913765238734, "rx_burst_amount": 73.82293056102753,
    "rx_burst_duration": 0.009834207663384664, "rx_idle_duration": 0.18935228904693702,
}


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.delenv("DRIPLE_MODELS", raising=False)  # the repository's trained_models/


@pytest.mark.parametrize("setting", SHIPPED)
def test_shipped_inspectors_group_with_the_seed_they_were_trained_with(shipped, setting):
    inspector = Predictor.load(setting).inspector
    assert inspector.build_options() == {"groups": 100, "grouping": "uniform", "features": "driple",
                                         "seed": 42}


def test_shipped_default_inspector_predicts_as_when_shipped(shipped):
    pytest.importorskip("driple.zoo")
    predictor = Predictor.load("cpu-ddp-w2-lo")
    assert predictor.entry["sha256"] == RESNET20_SHA256, \
        "cpu-ddp-w2-lo was reshipped: write down its ResNet-20 prediction here"
    from driple.graph.build import build_zoo_input

    graph = build_zoo_input("resnet", depth=20, batch_size=32, strategy=predictor.setting,
                            **predictor.inspector.build_options())
    raw = predictor.inspector.predict(graph)[0]
    profile = dict(zip(predictor.inspector.targets, raw.tolist()))
    assert profile == pytest.approx(RESNET20_B32, rel=1e-5)
