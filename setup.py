"""The optional C extension and the shipped inspectors; everything else is in pyproject.toml.

``optional=True``: without a compiler (or Python headers) the build goes on without it and the
sampler reads in pure Python (see driple/collect/sampling/native.py).

The repository's ``trained_models/`` stays the source of truth for the shipped inspectors: a
build copies its ``registry.json`` and every file an entry names (checkpoint, model card,
``scores.json``) into the package as ``driple/trained_models/``, after checking each
checkpoint against its registry checksum, so an installed wheel predicts without the
repository (lookup order in driple/predict/registry.py). MANIFEST.in puts the same files
in the sdist.
"""
import hashlib
import json
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "trained_models")
# figures a command prints beside its answer (``driple gpu-memory``'s measured error)
SHIPPED_FIGURES = ["evaluation/gpu/memory.json"]


def shipped_inspector_files(root=MODELS):
    """Paths (relative to ``root``) of the registry and of every file its entries name."""
    registry = os.path.join(root, "registry.json")
    if not os.path.isfile(registry):
        raise SystemExit(f"driple build: {registry} is missing; the shipped inspectors come from "
                         "the repository's trained_models/")
    with open(registry) as f:
        entries = json.load(f)["inspectors"]
    files = ["registry.json"]
    for e in entries:
        ckpt = os.path.join(root, e["path"])
        with open(ckpt, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != e["sha256"]:
            raise SystemExit(f"driple build: {ckpt} does not match its registry checksum")
        files.append(e["path"])
        if e.get("card"):
            files.append(e["card"])
        scores = os.path.join(os.path.dirname(e["path"]), "scores.json")
        if os.path.isfile(os.path.join(root, scores)):
            files.append(scores)
    for extra in SHIPPED_FIGURES:
        if os.path.isfile(os.path.join(root, extra)):
            files.append(extra)
    return files


class BuildWithInspectors(build_py):
    """``build_py`` that also copies the shipped inspectors into ``driple/trained_models/``.

    Not in an editable install: there the repository's ``trained_models/`` is found directly.
    """

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        dest = os.path.join(self.build_lib, "driple", "trained_models")
        for rel in shipped_inspector_files():
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(MODELS, rel), target)


ext = []
if sys.platform.startswith("linux"):
    ext.append(Extension(
        "driple.collect.sampling._fastread",
        ["driple/collect/sampling/_fastread.c"],
        optional=True,
    ))
setup(ext_modules=ext, cmdclass={"build_py": BuildWithInspectors})
