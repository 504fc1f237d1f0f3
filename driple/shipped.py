"""Shipped files: the inspectors and datasets that come with driple are never written by default.

The rule, for a path a command is about to write into:

- **shipped inspectors**: a directory holding a driple ``registry.json`` (the repository's
  ``trained_models/``, the package's copy, ``$DRIPLE_MODELS``), and everything under it;
- **shipped datasets**: everything under the ``datasets/`` directory of a driple checkout, i.e.
  a ``datasets/`` beside a ``trained_models/registry.json``.

``driple train``, ``finetune`` and ``collect run/sweep/corun/grid`` refuse such a path unless
given ``--overwrite-shipped`` (:func:`refuse_shipped`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from driple.errors import DripleError

REGISTRY_FILE = "registry.json"
REGISTRY_FORMAT = "driple-registry"
OVERWRITE_FLAG = "--overwrite-shipped"


def _is_registry(path: Path) -> bool:
    try:
        return path.is_file() and REGISTRY_FORMAT in path.read_text(errors="replace")[:4096]
    except OSError:
        return False


def shipped_root(path: str | os.PathLike) -> Optional[tuple[Path, str]]:
    """``(root, kind)`` when ``path`` lies in shipped files (kind ``"inspector"`` or
    ``"dataset"``), else None. ``path`` need not exist yet."""
    target = Path(os.path.abspath(Path(path).expanduser()))
    try:
        target = target.resolve()
    except OSError:
        pass
    for d in (target, *target.parents):
        if _is_registry(d / REGISTRY_FILE):
            return d, "inspector"
        if d.name == "datasets" and _is_registry(d.parent / "trained_models" / REGISTRY_FILE):
            return d, "dataset"
    return None


def refuse_shipped(path: str | os.PathLike, overwrite: bool = False, option: str = "--out") -> None:
    """Raise a :class:`DripleError` when ``path`` is in shipped files and ``overwrite`` is off."""
    found = shipped_root(path)
    if found is None or overwrite:
        return
    root, kind = found
    what = (f"a shipped inspector directory ({root / REGISTRY_FILE} lists the inspectors "
            "there, with checksums)" if kind == "inspector"
            else f"inside the shipped datasets ({root})")
    raise DripleError(f"{option} {path} is {what}; write to a new directory (e.g. {option} "
                      f"my-{Path(path).name or 'out'}) or pass {OVERWRITE_FLAG} to write there anyway")


def require_checkout(script: str | os.PathLike) -> None:
    """Stop a ``scripts/`` file run with the driple of another checkout: a script writes the
    shipped files of the checkout its imported driple comes from, and that must be its own
    (``pip install -e .`` there). Exits with a one-line error otherwise."""
    import driple

    mine = Path(script).resolve().parents[1]
    theirs = Path(driple.__file__).resolve().parents[1]
    if mine != theirs:
        raise SystemExit(f"{Path(script).name}: error: driple is imported from {theirs}, not from this "
                         f"script's checkout {mine}; run pip install -e {mine}")
