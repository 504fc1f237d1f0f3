"""Options shared by several ``driple`` sub-commands."""
from __future__ import annotations

from driple.errors import DripleError


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
