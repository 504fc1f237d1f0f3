"""driple: predict burst/idle resource usage of distributed training jobs before they run."""
from __future__ import annotations

__version__ = "0.1.0"

from driple._lazy import lazy_attributes
from driple.errors import DripleError
from driple.settings import Setting, parse_setting


_LAZY = {
    "build_input": "driple.graph.build",
    "Predictor": "driple.predict.predictor",
    "ResourceProfile": "driple.predict.profile",
    "list_settings": "driple.predict.registry",
    "colocate": "driple.predict.colocate",
}

# lazy: importing driple must not import torch
__getattr__, _lazy_all = lazy_attributes(__name__, _LAZY)
__all__ = ["DripleError", "Setting", "parse_setting", "__version__", *_lazy_all]
