"""The shipped inspectors: ``trained_models/registry.json`` lists one checkpoint per setting.

A registry entry says which setting a checkpoint predicts for, where it is (relative to the
registry), its SHA-256 (checked on every load: a truncated or swapped file is refused), how
it was trained and its scores on held-out jobs. ``trained_models/`` sits next to the ``driple``
package in the repository; ``DRIPLE_MODELS=/path/to/dir`` points elsewhere (e.g. a cluster's
own inspectors).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from driple.errors import DripleError

REGISTRY_FORMAT = "driple-registry"
REGISTRY_VERSION = 1
REGISTRY_FILE = "registry.json"


def models_dir() -> Path:
    """Directory of the registry: ``$DRIPLE_MODELS``, else the repository's ``trained_models/``."""
    env = os.environ.get("DRIPLE_MODELS")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "trained_models"


def sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_registry(root: Optional[Path] = None) -> dict:
    """The registry as a dict (an empty one when none exists yet)."""
    root = Path(root) if root is not None else models_dir()
    path = root / REGISTRY_FILE
    if not path.exists():
        return {"format": REGISTRY_FORMAT, "version": REGISTRY_VERSION, "default": None,
                "inspectors": []}
    try:
        reg = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DripleError(f"{path} is not a readable registry ({exc})") from None
    if not isinstance(reg, dict) or reg.get("format") != REGISTRY_FORMAT:
        raise DripleError(f"{path} is not a driple registry")
    if reg.get("version") != REGISTRY_VERSION:
        raise DripleError(f"{path} has registry version {reg.get('version')}, "
                          f"this driple reads {REGISTRY_VERSION}")
    return reg


def list_settings(root: Optional[Path] = None) -> list[dict]:
    """One dict per shipped inspector: ``setting``, ``description``, ``trained``, ``scores``,
    ``path``, ``sha256``, ``default`` (bool)."""
    reg = load_registry(root)
    return [{**e, "default": e.get("setting") == reg.get("default")} for e in reg["inspectors"]]


def resolve(name: Optional[str] = None, root: Optional[Path] = None) -> tuple[Path, dict]:
    """Checkpoint file and registry entry for a setting id (``None``: the default one).

    An unknown name lists the known ones; a file whose checksum differs from the registry's
    is refused.
    """
    root = Path(root) if root is not None else models_dir()
    reg = load_registry(root)
    entries = {e["setting"]: e for e in reg["inspectors"]}
    if not entries:
        raise DripleError(f"no shipped inspector in {root} (registry {REGISTRY_FILE} is missing "
                          "or empty); train one with `driple train` and load it by path")
    name = name or reg.get("default")
    if name not in entries:
        raise DripleError(f"no shipped inspector for setting {name!r}; known settings: "
                          f"{', '.join(sorted(entries))} (see `driple settings`), or give a "
                          "path to a checkpoint")
    entry = entries[name]
    path = root / entry["path"]
    if not path.exists():
        raise DripleError(f"the registry lists {path} for {name}, but the file is missing")
    digest = sha256(path)
    if entry.get("sha256") and digest != entry["sha256"]:
        raise DripleError(f"{path} does not match its registry checksum (sha256 {digest[:12]}..., "
                          f"expected {entry['sha256'][:12]}...): the file was changed or damaged")
    return path, entry


def register(setting: str, checkpoint: str | os.PathLike, *, description: str, trained: str,
             scores: dict, card: Optional[str] = None, default: bool = False,
             root: Optional[Path] = None) -> dict:
    """Add or replace the entry of ``setting`` (checksum computed here); returns the entry."""
    root = Path(root) if root is not None else models_dir()
    checkpoint = Path(checkpoint).resolve()
    try:
        rel = checkpoint.relative_to(root.resolve())
    except ValueError:
        raise DripleError(f"{checkpoint} is not inside the registry directory {root}") from None
    reg = load_registry(root)
    entry = {"setting": setting, "path": str(rel), "sha256": sha256(checkpoint),
             "description": description, "trained": trained, "scores": scores}
    if card:
        entry["card"] = card
    reg["inspectors"] = [e for e in reg["inspectors"] if e["setting"] != setting] + [entry]
    reg["inspectors"].sort(key=lambda e: e["setting"])
    if default or not reg.get("default"):
        reg["default"] = setting
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / (REGISTRY_FILE + ".tmp")
    tmp.write_text(json.dumps(reg, indent=2) + "\n")
    os.replace(tmp, root / REGISTRY_FILE)
    return entry
