"""driple: predict burst/idle resource usage of distributed training jobs before they run."""
from __future__ import annotations

__version__ = "0.1.0"

from driple.errors import DripleError
from driple.settings import Setting, parse_setting


def __getattr__(name):  # lazy: importing driple must not import torch
    if name == "build_input":
        from driple.graph.build import build_input

        return build_input
    raise AttributeError(f"module 'driple' has no attribute {name!r}")


__all__ = ["DripleError", "Setting", "parse_setting", "build_input", "__version__"]
