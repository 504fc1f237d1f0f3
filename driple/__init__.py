"""driple: predict burst/idle resource usage of distributed training jobs before they run."""
from __future__ import annotations

__version__ = "0.1.0"

from driple.errors import DripleError
from driple.settings import Setting, parse_setting


_LAZY = {
    "build_input": "driple.graph.build",
    "Predictor": "driple.predict.predictor",
    "ResourceProfile": "driple.predict.profile",
    "list_settings": "driple.predict.registry",
    "colocate": "driple.predict.colocate",
}


def __getattr__(name):  # lazy: importing driple must not import torch
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'driple' has no attribute {name!r}")


__all__ = ["DripleError", "Setting", "parse_setting", "__version__", *_LAZY]
