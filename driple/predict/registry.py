"""The shipped inspectors: a ``registry.json`` lists one checkpoint per setting.

A registry entry says which setting a checkpoint predicts for, where it is (relative to the
registry), its SHA-256 (checked on every load: a truncated or swapped file is refused), how
it was trained and its scores on held-out jobs.

Where the registry is found (:func:`models_dir`, the first that holds a ``registry.json``):

1. ``$DRIPLE_MODELS``, when set: that directory and nothing else (e.g. a cluster's own
   inspectors, or a test registry);
2. the package's own copy, ``driple/trained_models/`` inside an installed wheel (the build
   copies the repository's ``trained_models/`` there, see ``setup.py``);
3. the repository's ``trained_models/`` beside the ``driple`` package (a checkout or an
   editable install);
4. the user directory ``$XDG_DATA_HOME/driple/models`` (default ``~/.local/share/driple/models``).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from driple.errors import DripleError
from driple.shipped import REGISTRY_FILE, REGISTRY_FORMAT

REGISTRY_VERSION = 1


PACKAGE_DIR = Path(__file__).resolve().parents[1] / "trained_models"  # in a built wheel
CHECKOUT_DIR = Path(__file__).resolve().parents[2] / "trained_models"  # in the repository


def user_models_dir() -> Path:
    """``$XDG_DATA_HOME/driple/models`` (default ``~/.local/share/driple/models``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "driple" / "models"


def search_dirs() -> list[Path]:
    """Directories where a registry is looked for, in order (see the module docstring)."""
    env = os.environ.get("DRIPLE_MODELS")
    if env:
        return [Path(env).expanduser()]
    return [PACKAGE_DIR, CHECKOUT_DIR, user_models_dir()]


def models_dir() -> Path:
    """Directory of the registry: the first of :func:`search_dirs` holding a ``registry.json``
    (the first one when none does)."""
    dirs = search_dirs()
    for d in dirs:
        if (d / REGISTRY_FILE).is_file():
            return d
    return dirs[0]


def no_inspector_message(root: Optional[Path] = None) -> str:
    """Why no shipped inspector is found, with where driple looked and what to do."""
    looked = [Path(root)] if root is not None else search_dirs()
    return (f"no shipped inspector found (no {REGISTRY_FILE} with entries in "
            f"{', '.join(str(d) for d in looked)}); install driple from a wheel or sdist that "
            "holds its inspectors, point DRIPLE_MODELS at a directory holding a registry, or "
            "train one with `driple train` and load it by path")


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
    explicit_root = root is not None
    root = Path(root) if root is not None else models_dir()
    reg = load_registry(root)
    entries = {e["setting"]: e for e in reg["inspectors"]}
    if not entries:
        raise DripleError(no_inspector_message(root if explicit_root else None))
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


def entry_for(checkpoint: str | os.PathLike) -> Optional[dict]:
    """The registry entry of a checkpoint given by path, when the file is one a registry lists
    (the registry beside its directory, e.g. ``trained_models/<setting>/inspector.pt``) with a
    matching checksum; else None. A shipped inspector loaded by path keeps what its entry says
    (hardware, resident memory, scores)."""
    path = Path(checkpoint)
    if path.is_dir():
        path = path / "inspector.pt"
    if not path.is_file():
        return None
    for root in (path.parent, path.parent.parent):
        if not (root / REGISTRY_FILE).is_file():
            continue
        try:
            entries = load_registry(root)["inspectors"]
        except (DripleError, KeyError, TypeError):
            return None
        for entry in entries:
            listed = root / str(entry.get("path", ""))
            if listed.is_file() and listed.resolve() == path.resolve() and sha256(path) == entry.get("sha256"):
                return dict(entry)
    return None


#: What an entry may hold beside its checkpoint, checksum and words: :func:`register`'s optional
#: fields, each kept by whatever registers an entry's checkpoint again.
OPTIONAL_FIELDS = ("hardware", "resident", "unseen", "spec", "memory", "carried")


def optional_fields(entry: dict, without: tuple = ()) -> dict:
    """The :data:`OPTIONAL_FIELDS` that ``entry`` has (less ``without``), as :func:`register`'s
    keyword arguments: what registering its checkpoint again keeps."""
    return {k: entry[k] for k in OPTIONAL_FIELDS if k not in without and entry.get(k) is not None}


def register(setting: str, checkpoint: str | os.PathLike, *, description: str, trained: str,
             scores: dict, card: Optional[str] = None, default: bool = False,
             root: Optional[Path] = None, hardware: Optional[str] = None,
             resident: Optional[dict] = None, unseen: Optional[dict] = None,
             spec: Optional[dict] = None, memory: Optional[dict] = None,
             carried: Optional[list] = None) -> dict:
    """Add or replace the entry of ``setting`` (checksum computed here); returns the entry.
    ``hardware``: the CPU (or GPU) model its jobs were measured on, which the predictions describe;
    ``resident``: what a worker holds beside the predicted demand (:mod:`driple.collect.resident`);
    ``unseen``: its figures for a model of a family it did not train on (held-out families,
    ``scripts/calibrate_unseen_families.py``); ``spec``: the measuring machine's
    :class:`~driple.hardware.spec.HardwareSpec` as a dict (what ``--hardware trained`` means);
    ``memory``: the memory simulator's fit to the setting (``scripts/fit_memory.py --write``);
    ``carried``: how far its predictions carried to other machines measured
    (``scripts/register_carried.py``; :func:`driple.evaluation.hardware.carried_summary`)."""
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
    if hardware:
        entry["hardware"] = hardware
    if spec:
        entry["spec"] = spec
    if resident:
        entry["resident"] = resident
    if unseen:
        entry["unseen"] = unseen
    if memory:
        entry["memory"] = memory
    if carried:
        entry["carried"] = carried
    reg["inspectors"] = [e for e in reg["inspectors"] if e["setting"] != setting] + [entry]
    reg["inspectors"].sort(key=lambda e: e["setting"])
    if default or not reg.get("default"):
        reg["default"] = setting
    _write_registry(root, reg)
    return entry


def set_entry_field(field: str, values: dict, root: Optional[Path] = None) -> Path:
    """Set ``field`` of the entries of the settings in ``values`` (``{setting: value}``), leaving
    everything else (checksums included) as it is; a setting not in the registry is refused.
    Returns the registry file written."""
    root = Path(root) if root is not None else models_dir()
    reg = load_registry(root)
    shipped = {e["setting"] for e in reg["inspectors"]}
    missing = sorted(set(values) - shipped)
    if missing:
        raise DripleError(f"not shipped in {root}: {', '.join(missing)}")
    for e in reg["inspectors"]:
        if e["setting"] in values:
            e[field] = values[e["setting"]]
    return _write_registry(root, reg)


def _write_registry(root: Path, reg: dict) -> Path:
    """Write ``reg`` as ``root``'s registry, atomically."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / (REGISTRY_FILE + ".tmp")
    tmp.write_text(json.dumps(reg, indent=2) + "\n")
    os.replace(tmp, root / REGISTRY_FILE)
    return root / REGISTRY_FILE
