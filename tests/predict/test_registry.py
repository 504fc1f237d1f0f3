import json

import pytest

from driple.errors import DripleError
from driple.predict.predictor import Predictor
from driple.predict.registry import list_settings, load_registry, resolve


def test_registry_lists_and_resolves(registry):
    entries = list_settings()
    assert [e["setting"] for e in entries] == ["cpu-ddp-w2-lo"]
    assert entries[0]["default"] and len(entries[0]["sha256"]) == 64
    assert (registry / "cpu-ddp-w2-lo" / "MODEL_CARD.md").exists()
    path, entry = resolve(None)
    assert path == registry / "cpu-ddp-w2-lo" / "inspector.pt" and entry["setting"] == "cpu-ddp-w2-lo"


def test_unknown_setting_lists_known_ones(registry):
    with pytest.raises(DripleError, match="known settings: cpu-ddp-w2-lo"):
        Predictor.load("cpu-ps-p9w9-10g")


def test_checksum_mismatch_is_refused(registry, tmp_path, monkeypatch):
    import shutil

    copy = tmp_path / "models"
    shutil.copytree(registry, copy)
    monkeypatch.setenv("DRIPLE_MODELS", str(copy))
    with open(copy / "cpu-ddp-w2-lo" / "inspector.pt", "ab") as f:
        f.write(b"tampered")
    with pytest.raises(DripleError, match="checksum"):
        Predictor.load("cpu-ddp-w2-lo")


def test_missing_or_broken_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIPLE_MODELS", str(tmp_path))
    assert list_settings() == []
    with pytest.raises(DripleError, match="no shipped inspector"):
        Predictor.load()
    (tmp_path / "registry.json").write_text("{not json")
    with pytest.raises(DripleError, match="not a readable registry"):
        list_settings()
    (tmp_path / "registry.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(DripleError, match="not a driple registry"):
        load_registry()


def test_setting_id_wins_over_a_local_folder(registry, tmp_path, monkeypatch, capsys):
    """A folder named like a setting (a dataset, a `collect run --out`) does not shadow it;
    a name is a path only when it holds a checkpoint and is no shipped setting, or says so
    (a directory part, .pt)."""
    import shutil

    from driple.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cpu-ddp-w2-lo").mkdir()
    (tmp_path / "cpu-ddp-w2-lo" / "results.csv").write_text("job_id,status\n")
    assert main(["predict", "mlp", "--batch-size", "4", "--set", "hidden=32", "--set", "layers=1",
                 "--setting", "cpu-ddp-w2-lo", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inspector"]["trained"] == "random weights (test)"  # the registry's entry
    assert Predictor.load("cpu-ddp-w2-lo").entry["setting"] == "cpu-ddp-w2-lo"
    with pytest.raises(DripleError, match="no inspector checkpoint at ./cpu-ddp-w2-lo"):
        Predictor.load("./cpu-ddp-w2-lo")  # the folder, asked for explicitly, holds none
    # even a local checkpoint under a setting's name: the bare id is the shipped inspector
    shutil.copy(registry / "cpu-ddp-w2-lo" / "inspector.pt", tmp_path / "cpu-ddp-w2-lo")
    assert Predictor.load("cpu-ddp-w2-lo").entry.get("sha256")
    assert Predictor.load("./cpu-ddp-w2-lo").entry == {"setting": None, "path": "./cpu-ddp-w2-lo"}
    shutil.copytree(registry / "cpu-ddp-w2-lo", tmp_path / "mine")
    assert Predictor.load("mine").entry["path"] == "mine"  # holds a checkpoint, no setting id


def test_settings_without_any_inspector_exits_2(tmp_path, monkeypatch, capsys):
    from driple.cli import main

    monkeypatch.setenv("DRIPLE_MODELS", str(tmp_path))
    assert main(["settings"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("driple: error: no shipped inspector found") and str(tmp_path) in err
    assert main(["predict", "mlp"]) == 2
    assert "no shipped inspector found" in capsys.readouterr().err


def test_lookup_order(tmp_path, monkeypatch):
    """DRIPLE_MODELS alone when set; else the package's copy, the checkout, the user directory."""
    from driple.predict import registry as reg

    monkeypatch.setenv("DRIPLE_MODELS", str(tmp_path / "mine"))
    assert reg.search_dirs() == [tmp_path / "mine"]
    monkeypatch.delenv("DRIPLE_MODELS")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert reg.search_dirs() == [reg.PACKAGE_DIR, reg.CHECKOUT_DIR, tmp_path / "xdg" / "driple" / "models"]
    monkeypatch.setattr(reg, "PACKAGE_DIR", tmp_path / "none")
    monkeypatch.setattr(reg, "CHECKOUT_DIR", tmp_path / "none")
    assert reg.models_dir() == tmp_path / "none"  # nothing anywhere: the first place
    user = tmp_path / "xdg" / "driple" / "models"
    user.mkdir(parents=True)
    (user / "registry.json").write_text(json.dumps({"format": "driple-registry", "version": 1,
                                                     "default": None, "inspectors": []}))
    assert reg.models_dir() == user


def test_registering_again_keeps_what_it_is_given(registry, tmp_path, monkeypatch):
    """An entry registered again (a new checksum after calibrate_unseen_families.py) keeps the
    memory fit and spec it is handed."""
    import shutil

    from driple.predict.registry import register

    copy = tmp_path / "models"
    shutil.copytree(registry, copy)
    monkeypatch.setenv("DRIPLE_MODELS", str(copy))
    path, entry = resolve("cpu-ddp-w2-lo")
    fit = {"offset_mb": 118.0, "scale": 1.01, "fitted_on": "4 jobs", "lofo_mape": 1.0, "interval_rel": 0.02}
    again = register("cpu-ddp-w2-lo", path, description="d", trained="t", scores={}, root=copy,
                     memory=fit, spec={"cpu_model": "x"})
    assert again["memory"] == fit and again["spec"] == {"cpu_model": "x"}
    assert resolve("cpu-ddp-w2-lo")[1]["memory"] == fit
    assert "memory" not in register("cpu-ddp-w2-lo", path, description="d", trained="t", scores={}, root=copy)


def test_one_field_of_entries_is_set_and_the_rest_kept(registry, tmp_path, monkeypatch):
    """What fit_memory.py and register_carried.py write: one field, the checksum untouched."""
    import shutil

    from driple.predict.registry import set_entry_field

    copy = tmp_path / "models"
    shutil.copytree(registry, copy)
    monkeypatch.setenv("DRIPLE_MODELS", str(copy))
    before = resolve("cpu-ddp-w2-lo")[1]
    assert set_entry_field("carried", {"cpu-ddp-w2-lo": [{"machine": "m"}]}, copy) == copy / "registry.json"
    after = resolve("cpu-ddp-w2-lo")[1]
    assert after["carried"] == [{"machine": "m"}] and after["sha256"] == before["sha256"]
    assert {k: v for k, v in after.items() if k != "carried"} == before
    with pytest.raises(DripleError, match="not shipped in .*: cpu-x"):
        set_entry_field("memory", {"cpu-x": {}}, copy)
    assert not (copy / "registry.json.tmp").exists()


def test_recording_the_sources_label_range_keeps_its_fields(registry, tmp_path, monkeypatch, write_dataset):
    """``ship_inspectors.py --reuse-source`` on a source without a label range saves it again:
    the new entry keeps its memory fit, unseen-family figures and carried errors."""
    import shutil
    from pathlib import Path

    from driple.collect.results import load_results
    from driple.inspector.checkpoint import load_inspector
    from driple.predict.registry import register, set_entry_field
    from driple.shipping.settings import _shipped_source

    copy = tmp_path / "models"
    shutil.copytree(registry, copy)
    monkeypatch.setenv("DRIPLE_MODELS", str(copy))
    data = write_dataset(tmp_path / "cpu-ddp-w2-lo")
    path, entry = resolve("cpu-ddp-w2-lo")
    inspector = load_inspector(str(path))
    inspector.target_scaler.low_ = inspector.target_scaler.high_ = None
    inspector.info["split"] = {"train": list(load_results(str(data))["job_id"])}
    register("cpu-ddp-w2-lo", inspector.save(str(Path(path).parent)), description="d", trained="t",
             scores={}, root=copy)
    kept = {"memory": {"scale": 1.01}, "unseen": {"step_time": 14.0}, "carried": [{"machine": "m"}]}
    for field, value in kept.items():
        set_entry_field(field, {"cpu-ddp-w2-lo": value}, copy)
    _shipped_source("cpu-ddp-w2-lo", str(data), str(copy))
    after = resolve("cpu-ddp-w2-lo")[1]
    assert load_inspector(str(resolve("cpu-ddp-w2-lo")[0])).target_scaler.low_ is not None
    assert {k: after.get(k) for k in kept} == kept
