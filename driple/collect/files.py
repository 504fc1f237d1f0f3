"""Files the collector writes whole or not at all: a temporary file, then an atomic rename.

A crash or Ctrl-C at any moment leaves the old file or the new one, never a torn one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (``.<name>.tmp`` beside it, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def write_json(path: str | os.PathLike, data) -> Path:
    """Write ``data`` as indented JSON atomically; numpy scalars/arrays and paths are converted."""
    return write_text(path, json.dumps(data, indent=1, default=json_default))


def json_default(obj):
    """``json.dumps(default=...)`` for numpy scalars and arrays and for paths."""
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:
        pass
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
