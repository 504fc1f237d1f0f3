"""The shipped inspectors (``trained_models/``) keep reading graphs grouped as when they were trained.

Their checkpoints record the grouping seed (42); whatever the builder's defaults become, their
graphs must still be grouped with it, and the default inspector must predict what it did when
it was shipped.
"""
import pytest

from driple.predict.predictor import Predictor

SHIPPED = ("cpu-ddp-w2-1g", "cpu-ddp-w2-lo", "cpu-fsdp-w2-1g", "cpu-fsdp-w2-lo", "cpu-ps-p1w2-1g")
# where each setting's evaluation (accuracy.json, unseen_families.json) lies under trained_models/
EVALUATION = {"cpu-fsdp-w2-lo": "evaluation/fsdp", "cpu-fsdp-w2-1g": "evaluation/fsdp"}

# The default inspector's prediction for ResNet-20, batch 32, written down when it was shipped
# (labels v2, builder v5: the hybrid + roofline, chosen by the inner leave-family-out;
# with its unseen-family intervals, which change no prediction). Reshipping it means writing down its
# new values.
RESNET20_SHA256 = "7ab9cdd2b907cd057b8af75ba9898ee760e86c65b9efdeb37ecf74861372cea0"
RESNET20_B32 = {
    "compute_burst_amount": 96.92880490946324, "compute_burst_duration": 0.1557132492030374,
    "compute_idle_duration": 0.005968354068174246, "memory_burst_amount": 177.1123766742977,
    "memory_burst_duration": 0.1004482751547913, "memory_idle_duration": 0.06868074495675726,
    "tx_burst_amount": 195.15451406108537, "tx_burst_duration": 0.004181275763383118,
    "tx_idle_duration": 0.1581239424930581, "rx_burst_amount": 202.7602545262815,
    "rx_burst_duration": 0.0040981571543971486, "rx_idle_duration": 0.15831101385677782,
    "step_time": 0.16528476451293986,
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


@pytest.mark.parametrize("setting", SHIPPED)
def test_shipped_inspectors_carry_their_unseen_family_intervals(shipped, setting):
    """Each shipped inspector holds the intervals its evaluation calibrated on held-out families
    (scripts/calibrate_unseen_families.py), with the roofline modes where they win cross-fitted,
    for the families it trained on: every zoo family of its dataset is seen; a user's model is not."""
    import json
    from pathlib import Path

    predictor = Predictor.load(setting)
    unseen = predictor.unseen
    assert unseen is not None, f"{setting}: run python scripts/calibrate_unseen_families.py"
    assert unseen.families == ("alexnet", "bert", "densenet", "googlenet", "gpt", "lstm_lm", "mlp",
                               "mobilenetv2", "resnet", "vgg", "vit")
    assert not unseen.is_unseen("resnet") and unseen.is_unseen("user")
    where = Path(__file__).resolve().parents[2] / "trained_models" / EVALUATION.get(setting, "evaluation")
    evaluation = json.loads((where / "accuracy.json").read_text())["settings"][setting]["family"]
    shipped_figures = json.loads((where / "unseen_families.json").read_text())["settings"][setting]
    assert unseen.modes == shipped_figures["modes"]
    if unseen.joined:  # 1g, PS: modes won cross-fitted, each with the roofline it was chosen with
        assert unseen.source["median_mape"] == shipped_figures["cross_fitted"]["median_mape"] < \
            shipped_figures["as_is"]["median_mape"]
        assert unseen.source["coverage"] == shipped_figures["cross_fitted"]["coverage"]
        assert set(unseen.rooflines) == {m.partition(":")[2] for m in unseen.joined.values()}
    else:  # lo: the modes do not win there, the intervals alone
        assert not unseen.rooflines
        assert unseen.intervals.to_dict() == evaluation["family_intervals"]
        assert unseen.source["coverage"] == evaluation["coverage_other_families"]["inspector"]["mean"]


def test_each_shipped_inspector_names_the_hardware_of_its_dataset(shipped, capsys):
    """The registry says what hardware each inspector's predictions describe: the CPU model
    datasets/settings.json records for the setting's dataset (every row of it measured there)."""
    from pathlib import Path

    from driple.cli import main
    from driple.predict.registry import CHECKOUT_DIR, load_registry
    from driple.setting_datasets import SettingDatasets

    index = SettingDatasets.load(Path(__file__).resolve().parents[2] / "datasets")
    entries = {e["setting"]: e for e in load_registry(CHECKOUT_DIR)["inspectors"]}
    assert set(entries) == set(SHIPPED)
    for setting, entry in entries.items():
        assert entry["hardware"] == index.cpu_model(setting), setting
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert f"measured on: {entries['cpu-ps-p1w2-1g']['hardware']}" in out
    assert f"resident memory: {entries['cpu-ps-p1w2-1g']['resident']['memory']:.0f} MB per worker" in out
    # and what it does for a user's model, as calibrate_unseen_families.py recorded it
    for setting, entry in entries.items():
        u = Predictor.load(setting).unseen.source
        assert entry["unseen"]["step_time_mape"] == u["step_time_mape"]
        assert f"a model of another family (yours): step time MAPE {u['step_time_mape']:.1f}%" in out
    joined = {s for s, e in entries.items() if e["unseen"]["roofline_modes"]}
    assert {"cpu-ddp-w2-1g", "cpu-ps-p1w2-1g"} <= joined and "cpu-ddp-w2-lo" not in joined
    assert out.count("; roofline joined as chosen there") == len(joined)


def test_a_shipped_checkpoint_loaded_by_path_keeps_its_registry_entry(shipped, tmp_path):
    """Resident memory and hardware come from the registry entry, also when the inspector is
    loaded by path (as scripts/eval_colocate.py does); a copy elsewhere has no entry."""
    import shutil

    from driple.predict.registry import CHECKOUT_DIR, entry_for, load_registry

    entry = {e["setting"]: e for e in load_registry(CHECKOUT_DIR)["inspectors"]}["cpu-ps-p1w2-1g"]
    assert 100 < entry["resident"]["memory"] < 400  # MB a worker holds beside its tensors
    path = CHECKOUT_DIR / entry["path"]
    by_path = Predictor.load(str(path))
    assert by_path.resident == {"memory": entry["resident"]["memory"]}
    assert by_path.describe()["hardware"] == entry["hardware"]
    copy = tmp_path / "inspector.pt"
    shutil.copy(path, copy)
    assert entry_for(copy) is None and Predictor.load(str(copy)).resident is None


@pytest.mark.parametrize("setting", SHIPPED)
def test_shipped_inspectors_take_memory_from_the_simulator_fitted_to_their_dataset(shipped, setting):
    """Each registry entry carries the memory simulator's fit (scripts/fit_memory.py --write) to
    its own dataset's training jobs: the memory amount a prediction gives comes from it."""
    from pathlib import Path

    from driple.setting_datasets import SettingDatasets

    fit = Predictor.load(setting).entry.get("memory")
    assert fit, f"{setting}: run python scripts/fit_memory.py --write --settings {setting}"
    index = SettingDatasets.load(Path(__file__).resolve().parents[2] / "datasets")
    assert fit["fitted_on"].endswith(f"training jobs of datasets/{index.entries[setting]['dataset']}")
    assert 0.9 < fit["scale"] < 1.2 and 0 < fit["offset_mb"] < 400 and fit["interval_rel"] < 0.2


@pytest.mark.parametrize("setting", SHIPPED)
def test_a_shipped_entry_times_memory_by_the_cycle_only_where_it_won(shipped, setting):
    """The registry keeps the memory cycle's tail fit exactly where its figures (memory.json)
    beat the network's own durations on held-out families."""
    import json
    from pathlib import Path

    from driple.evaluation.memory import compared, cycle_wins

    models = Path(__file__).resolve().parents[2] / "trained_models"
    name = {"cpu-fsdp-w2-lo": "evaluation/fsdp/memory.json", "cpu-fsdp-w2-1g": "evaluation/fsdp/memory.json"}
    figures = json.loads((models / name.get(setting, "evaluation/memory.json")).read_text())["settings"][setting]
    cycle = (Predictor.load(setting).entry.get("memory") or {}).get("cycle")
    assert "cycle" in figures and (cycle is not None) == cycle_wins(figures["cycle"])
    if cycle is not None:
        held = compared(figures["cycle"])[0]
        assert cycle["held_out"]["burst_mape"] == pytest.approx(held["burst_mape"])
