"""Options shared by several ``driple`` sub-commands."""
from __future__ import annotations

from driple.errors import DripleError

# a measurement during which other processes used more than this % of the host CPU is
# "contended": training leaves it out (--max-contention) and `collect run` says so
CONTENDED_PCT = 10.0


def parse_knobs(pairs: list[str] | None) -> dict:
    """``["depth=50", "dropout=0.1"]`` -> ``{"depth": 50, "dropout": 0.1}`` (YAML scalars)."""
    import yaml

    knobs = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DripleError(f"cannot read --set {pair!r}; write knob=value, e.g. --set depth=50")
        try:
            knobs[key.strip()] = yaml.safe_load(value.strip())
        except yaml.YAMLError:
            knobs[key.strip()] = value.strip()
    return knobs


def parse_job(text: str) -> dict:
    """``"resnet,depth=56,bs=64,opt=adam"`` -> ``{"model", "knobs", "batch_size", "optimizer"}``.

    A job on the command line is a model (zoo name or ``module:function``) followed by
    comma-separated ``knob=value`` pairs; ``bs`` and ``opt`` set the batch size and optimizer.
    """
    model, *pairs = [p.strip() for p in text.split(",")]
    if not model or "=" in model:
        raise DripleError(f"cannot read job {text!r}; write MODEL[,knob=value...], e.g. resnet50,bs=32")
    knobs = parse_knobs(pairs)
    batch_size = knobs.pop("bs", None)
    optimizer = str(knobs.pop("opt", "sgd"))
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise DripleError(f"bs={batch_size!r} in job {text!r} is not a positive integer")
    if optimizer not in ("sgd", "adam", "adamw"):
        raise DripleError(f"opt={optimizer!r} in job {text!r}: use sgd, adam or adamw")
    return {"model": model, "knobs": knobs, "batch_size": batch_size, "optimizer": optimizer}
