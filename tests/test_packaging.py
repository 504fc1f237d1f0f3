"""The sdist and the wheel carry the shipped inspectors, and an installed wheel predicts.

Built from a copy of the source tree (the build writes build/ and *.egg-info beside its
sources), with the running environment's setuptools (torch itself requires setuptools>=77.0.3),
so no package index is needed: sdist through setuptools' PEP 517 hook, wheel from the unpacked
sdist by ``pip wheel --no-build-isolation``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("driple", "trained_models", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md")


def _run(cmd, cwd, env=None):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


def _setuptools_reads_spdx() -> bool:
    from importlib.metadata import version

    major, minor = (int(x) for x in version("setuptools").split(".")[:2])
    return (major, minor) >= (77, 0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(sdist path, wheel path) built from a copy of this checkout."""
    if not _setuptools_reads_spdx():
        pytest.skip("the build needs setuptools>=77.0.3 (pyproject.toml); torch 2.13 brings it")
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc", "*.egg-info", "processed")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    sdist_name = _run([sys.executable, "-c", "from setuptools import build_meta as b; "
                       "print(b.build_sdist('dist'))"], cwd=src).strip().splitlines()[-1]
    sdist = src / "dist" / sdist_name
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(tmp / "wheel"), str(unpacked)], cwd=tmp)
    (wheel,) = (tmp / "wheel").glob("driple-*.whl")
    return sdist, wheel


def _registry():
    return json.loads((ROOT / "trained_models" / "registry.json").read_text())


def test_sdist_holds_the_inspectors(built):
    sdist, _ = built
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert "trained_models/registry.json" in names and "setup.py" in names
    for e in _registry()["inspectors"]:
        assert f"trained_models/{e['path']}" in names and f"trained_models/{e['card']}" in names


def test_wheel_holds_the_registry_and_checked_inspectors(built):
    _, wheel = built
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        reg = json.loads(zf.read("driple/trained_models/registry.json"))
        assert reg == _registry()
        for e in reg["inspectors"]:
            data = zf.read(f"driple/trained_models/{e['path']}")
            assert hashlib.sha256(data).hexdigest() == e["sha256"]
            assert f"driple/trained_models/{e['card']}" in names
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert not any(n.startswith(("trained_models/", "datasets/", "tests/")) for n in names)


def test_installed_wheel_predicts_outside_the_repository(built, tmp_path):
    """From a directory far from the checkout, with no DRIPLE_MODELS: the package's own copy."""
    _, wheel = built
    site = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
          str(wheel)], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "DRIPLE_MODELS"}
    env.update(PYTHONPATH=str(site), XDG_DATA_HOME=str(tmp_path / "xdg"))
    out = _run([sys.executable, "-c",
                "import driple, json; from driple.predict.registry import models_dir; "
                "from driple import Predictor; p = Predictor.load('cpu-ddp-w2-lo'); "
                "print(json.dumps([driple.__file__, str(models_dir()), p.setting]))"],
               cwd=tmp_path, env=env)
    module, models, setting = json.loads(out.strip().splitlines()[-1])
    assert module.startswith(str(site)) and models == str(site / "driple" / "trained_models")
    assert setting == "cpu-ddp-w2-lo"
    listing = _run([sys.executable, "-m", "driple", "settings"], cwd=tmp_path, env=env)
    assert "cpu-ddp-w2-lo (default)" in listing and "cpu-ps-p1w2-1g" in listing
