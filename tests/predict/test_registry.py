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
