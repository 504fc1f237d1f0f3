"""``driple.setting_datasets``: which dataset (and CPU model) stands for each setting."""
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from driple.errors import DripleError
from driple.setting_datasets import INDEX_FILE, INDEX_FORMAT, SettingDatasets

ROOT = Path(__file__).resolve().parents[1]


def _with_cpu(root, cpu_models):
    """Give the results.csv at ``root`` a cpu_model column, row by row from ``cpu_models``."""
    path = Path(root) / "results.csv"
    table = pd.read_csv(path)
    table["cpu_model"] = [cpu_models[i % len(cpu_models)] for i in range(len(table))]
    table.to_csv(path, index=False)


def _index(root, settings):
    Path(root, INDEX_FILE).write_text(json.dumps({"format": INDEX_FORMAT, "settings": settings}))


@pytest.fixture
def collections(tmp_path, write_dataset):
    """amd/{cpu-ddp-w2-lo, cpu-ddp-w2-lo-retest, cpu-ps-p1w2-1g, corun-cpu-ps-p1w2-1g} and
    intel/{cpu-ps-p1w2-1g, corun-cpu-ps-p1w2-1g}: the PS setting is measured on Intel."""
    for d, cpu in (("amd/cpu-ddp-w2-lo", "AMD"), ("amd/cpu-ddp-w2-lo-retest", "AMD"),
                   ("amd/cpu-ps-p1w2-1g", "AMD"), ("intel/cpu-ps-p1w2-1g", "Intel")):
        _with_cpu(write_dataset(tmp_path / d, n_configs=3, setting=os.path.basename(d).replace("-retest", "")), [cpu])
    for d in ("amd/corun-cpu-ps-p1w2-1g", "intel/corun-cpu-ps-p1w2-1g"):
        os.makedirs(tmp_path / d)
    _index(tmp_path, {"cpu-ddp-w2-lo": {"dataset": "amd/cpu-ddp-w2-lo", "cpu_model": "AMD"},
                      "cpu-ps-p1w2-1g": {"dataset": "intel/cpu-ps-p1w2-1g", "cpu_model": "Intel"}})
    return tmp_path


def test_the_index_names_each_settings_dataset_and_what_sits_beside_it(collections):
    index = SettingDatasets.load(collections)
    assert index.settings() == ["cpu-ddp-w2-lo", "cpu-ps-p1w2-1g"]
    assert index.dataset_dir("cpu-ps-p1w2-1g") == str(collections / "intel" / "cpu-ps-p1w2-1g")
    assert index.corun_dir("cpu-ps-p1w2-1g") == str(collections / "intel" / "corun-cpu-ps-p1w2-1g")
    assert index.cpu_model("cpu-ddp-w2-lo") == "AMD"
    assert index.collections() == [str(collections / "amd"), str(collections / "intel")]
    assert index.check_cpu_models() == []
    with pytest.raises(DripleError, match="names no dataset for cpu-ddp-w2-1g"):
        index.dataset_dir("cpu-ddp-w2-1g")


def test_a_dataset_of_another_or_of_two_cpu_models_is_named(collections):
    _with_cpu(collections / "intel" / "cpu-ps-p1w2-1g", ["Intel", "AMD"])
    problems = SettingDatasets.load(collections).check_cpu_models()
    assert len(problems) == 1
    assert "cpu-ps-p1w2-1g" in problems[0] and "'AMD', 'Intel'" in problems[0]


def test_a_directory_without_an_index_is_read_flat(collections):
    index = SettingDatasets.load(collections / "amd")
    assert not index.indexed
    assert index.settings() == ["cpu-ddp-w2-lo", "cpu-ps-p1w2-1g"]  # not the retest nor the co-runs
    assert index.dataset_dir("cpu-ddp-w2-1g") == str(collections / "amd" / "cpu-ddp-w2-1g")
    assert index.collections() == [str(collections / "amd")]


@pytest.mark.parametrize("text, why", [
    ("{not json", "not a readable setting index"),
    (json.dumps({"format": "other", "settings": {}}), "format is 'other'"),
    (json.dumps({"format": INDEX_FORMAT, "settings": {"cpu-ddp-w2-lo": {}}}), "names no dataset"),
    (json.dumps({"format": INDEX_FORMAT, "settings": {"tpu-x": {"dataset": "a"}}}), "cannot read setting"),
])
def test_a_broken_index_is_a_clear_error(tmp_path, text, why):
    (tmp_path / INDEX_FILE).write_text(text)
    with pytest.raises(DripleError, match=why):
        SettingDatasets.load(tmp_path)


def test_the_shipped_index_matches_the_shipped_datasets():
    """Every shipped setting's dataset holds rows of exactly the CPU model the index names."""
    index = SettingDatasets.load(ROOT / "datasets")
    assert set(index.settings()) == {"cpu-ddp-w2-lo", "cpu-ddp-w2-1g", "cpu-ps-p1w2-1g", "cpu-fsdp-w2-lo", "cpu-fsdp-w2-1g"}
    assert index.check_cpu_models() == []
