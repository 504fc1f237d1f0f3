"""Optimizers the zoo trains with, by name, with the usual default learning rates.

:data:`OPTIMIZERS` is the one list of optimizer names (job specs, the command line, the tracer);
reading it does not import torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing torch here would cost every import of this module
    import torch

import difflib
from typing import Iterable

from driple.errors import DripleError

OPTIMIZERS = ("sgd", "adam", "adamw")
DEFAULT_LR = {"sgd": 0.01, "adam": 1e-3, "adamw": 1e-3}


def make_optimizer(name: str, params: Iterable, lr: float | None = None) -> "torch.optim.Optimizer":
    """``sgd`` (momentum 0.9), ``adam`` or ``adamw`` (weight decay 0.01) over ``params``.

    ``lr`` defaults to :data:`DEFAULT_LR`. Torch picks its per-parameter (not foreach) kernels
    on CPU, which is what the traced graph and the CPU collector see.
    """
    key = str(name).lower()
    if key not in OPTIMIZERS:
        close = difflib.get_close_matches(key, OPTIMIZERS, n=1, cutoff=0.4)
        hint = f"Did you mean {close[0]!r}? " if close else ""
        raise DripleError(f"unknown optimizer {name!r}. {hint}Use one of: {', '.join(OPTIMIZERS)}.")
    if lr is None:
        lr = DEFAULT_LR[key]
    elif not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr > 0:
        raise DripleError(f"learning rate must be a positive number, got {lr!r}")
    import torch

    if key == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if key == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
