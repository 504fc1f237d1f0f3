"""Lazy package attributes: ``import driple`` (or a subpackage) must not import torch.

A package lists ``{name: module}`` and gets a module-level ``__getattr__`` that imports the
module on first use (PEP 562), and the matching ``__all__``.
"""
from __future__ import annotations

import importlib
from typing import Callable, Mapping


def lazy_attributes(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], object], list]:
    """``(__getattr__, __all__)`` for ``package`` whose attributes ``table`` maps to modules."""
    def __getattr__(name: str):
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(table)
