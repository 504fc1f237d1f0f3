"""The model registry: families, their knobs, named presets, and :func:`build_workload`.

A *family* is a parameterised architecture (``resnet``, ``gpt``, ...) whose knobs default to a
small CIFAR-sized / short-sequence configuration that trains one step in roughly 20 ms - 2 s on
one CPU thread. A *preset* is a named knob setting of a family (``resnet50``, ``gpt_tiny``);
presets accept knob overrides like families do. Family modules (``vision``, ``sequence``,
``tabular``) register themselves here with :func:`register_family` and :func:`register_preset`.
"""
from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor, nn

from driple.errors import DripleError

#: Modules that register the zoo's families and presets, imported when the registry is first asked.
FAMILY_MODULES = ("driple.zoo.vision", "driple.zoo.sequence", "driple.zoo.tabular")
MODEL_SEED = 0  # every model is initialised from this seed, so a name + knobs is one model
DATA_SEED = 0  # make_batch() without a generator draws from a generator seeded with this


# --------------------------------------------------------------------------- public records
@dataclass(frozen=True)
class ModelSpec:
    """One entry of :func:`list_models`.

    ``knobs`` maps every knob of the entry to its default value. ``preset`` is True for the
    full-size published configurations (ImageNet 224x224 CNNs, BERT-base, GPT-2 small, ...),
    whose step at ``default_batch_size`` is beyond the 2 s single-thread budget that family
    defaults and small named configurations (``resnet20_cifar``, ``gpt_tiny``) keep.
    """

    name: str
    family: str
    description: str
    knobs: dict
    preset: bool
    default_batch_size: int


@dataclass
class Workload:
    """A model ready to train on synthetic data: ``out = model(inputs); loss_fn(out, targets)``.

    ``config`` holds every knob value plus ``batch_size``. The model is built on CPU from
    :data:`MODEL_SEED`, so the same name and knobs always give the same weights.
    """

    name: str
    family: str
    model: nn.Module = field(repr=False)
    config: dict
    loss_fn: Callable[[Tensor, Tensor], Tensor] = field(repr=False)
    task: "Task" = field(repr=False)

    @property
    def batch_size(self) -> int:
        """Default batch size of this workload (samples per step)."""
        return int(self.config["batch_size"])

    @property
    def num_parameters(self) -> int:
        """Number of trainable scalars of the model."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def make_batch(
        self,
        batch_size: int | None = None,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
    ) -> tuple[Tensor, Tensor]:
        """Synthetic ``(inputs, targets)`` of ``batch_size`` samples (default: the workload's).

        Without a ``generator`` the batch is drawn from one seeded with :data:`DATA_SEED`, so it
        is the same every call. Tensors are drawn on CPU and moved to ``device``; on the meta
        device only their shapes and dtypes are made (one sample is drawn to learn them), so a
        batch of any size costs nothing.
        """
        size = self.batch_size if batch_size is None else _check_batch_size(batch_size)
        if generator is None:
            generator = torch.Generator().manual_seed(DATA_SEED)
        if torch.device(device).type == "meta":
            one = self.task.make_batch(self.config, 1, generator)
            return tuple(torch.empty((size, *t.shape[1:]), dtype=t.dtype, device="meta") for t in one)
        inputs, targets = self.task.make_batch(self.config, size, generator)
        return inputs.to(device), targets.to(device)

    @property
    def example_batch(self) -> tuple[Tensor, Tensor]:
        """``make_batch()`` at the workload's batch size (a fresh, deterministic batch)."""
        return self.make_batch()


# --------------------------------------------------------------------------- internal records
@dataclass(frozen=True)
class Task:
    """What a family trains on: how to draw a synthetic batch and the loss.

    ``make_batch(config, batch_size, generator) -> (inputs, targets)`` on CPU;
    ``loss_fn(output, targets) -> scalar`` must be a plain, traceable torch function.
    """

    name: str
    make_batch: Callable[[dict, int, torch.Generator], tuple[Tensor, Tensor]]
    loss_fn: Callable[[Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class Knob:
    """A family hyper-parameter. The type of ``default`` is the knob's type (int, float, bool,
    str or tuple of ints); ``choices`` limits the values; ``check(value)`` returns an error
    text or None; ``help`` says what the knob is, with its unit."""

    name: str
    default: Any
    help: str
    choices: tuple | None = None
    check: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class Family:
    """A parameterised architecture. ``build(config)`` returns the nn.Module; ``validate(config)``
    checks knobs against each other and returns an error text or None."""

    name: str
    description: str
    knobs: tuple[Knob, ...]
    build: Callable[[dict], nn.Module]
    task: Callable[[dict], Task]
    default_batch_size: int
    validate: Callable[[dict], str | None] | None = None

    def knob(self, name: str) -> Knob:
        return next(k for k in self.knobs if k.name == name)


@dataclass(frozen=True)
class _Preset:
    name: str
    family: str
    description: str
    knobs: dict
    full_size: bool
    batch_size: int | None


_FAMILIES: dict[str, Family] = {}
_PRESETS: dict[str, _Preset] = {}


def register_family(family: Family) -> Family:
    """Add a family; its name is also a model name (the family with its default knobs)."""
    if family.name in _FAMILIES or family.name in _PRESETS:
        raise ValueError(f"model name {family.name!r} registered twice")
    _FAMILIES[family.name] = family
    return family


def register_preset(
    name: str,
    family: str,
    description: str,
    *,
    full_size: bool = False,
    batch_size: int | None = None,
    **knobs: Any,
) -> None:
    """Add a named knob setting of a registered family (knobs are checked now, not at build)."""
    if name in _FAMILIES or name in _PRESETS:
        raise ValueError(f"model name {name!r} registered twice")
    fam = _FAMILIES[family]
    _resolve_knobs(name, fam, {}, knobs)  # fail at import, not at a user's build
    _PRESETS[name] = _Preset(name, family, description, dict(knobs), full_size, batch_size)


# --------------------------------------------------------------------------- public functions
def list_models() -> list[ModelSpec]:
    """Every model name: the families (default knobs) first, then the presets, each by name."""
    _load_families()
    specs = [_spec(name) for name in sorted(_FAMILIES)]
    specs += [_spec(name) for name in sorted(_PRESETS)]
    return specs


def get_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of one model name (DripleError if unknown)."""
    return _spec(_check_name(name))


def resolve_config(name: str, batch_size: int | None = None, **knobs: Any) -> dict:
    """Every knob value of ``name`` with ``knobs`` applied, plus ``batch_size``; validates all.

    Knob values may be given as strings (from a command line or YAML): ``"0.5"``, ``"true"``,
    ``"6,12,24,16"`` are converted to the knob's type.
    """
    family, base, default_bs = _lookup(_check_name(name))
    config = _resolve_knobs(name, family, base, knobs)
    config["batch_size"] = default_bs if batch_size is None else _check_batch_size(batch_size)
    return config


def build_workload(name: str, batch_size: int | None = None, *, shapes_only: bool = False,
                   **knobs: Any) -> Workload:
    """Build the model ``name`` (a family or a preset) with ``knobs`` overriding its defaults.

    The model is built on CPU from a fixed seed and left in training mode. ``shapes_only``
    builds it on the meta device instead (parameters with shapes, no memory: what a trace
    reads; GPT-2 small draws its weights in ~2.7 s of CPU, on meta in 0.1 s), or on CPU when an
    initialiser has no meta kernel. Raises :class:`DripleError` for an unknown name, knob or a
    bad knob value.
    """
    config = resolve_config(name, batch_size, **knobs)
    family = _lookup(name)[0]
    model = None
    if shapes_only:
        try:
            model = build_model(family.name, config, device="meta")
        except Exception:  # noqa: BLE001 - an initialiser without a meta kernel: real weights
            model = None
    if model is None:
        model = build_model(family.name, config)
    task = family.task(config)
    return Workload(name, family.name, model, config, task.loss_fn, task)


def build_model(family: str, config: dict, device: str | torch.device | None = None) -> nn.Module:
    """The nn.Module of a resolved ``config``, initialised from :data:`MODEL_SEED`.

    ``device="meta"`` builds it without memory (for counting parameters and FLOPs).
    """
    _load_families()
    fam = _FAMILIES[family]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(MODEL_SEED)
        if device is None:
            model = fam.build(config)
        else:
            with torch.device(device):
                model = fam.build(config)
    return model.train()


def family_of(name: str) -> Family:
    """The :class:`Family` a model name belongs to."""
    return _lookup(_check_name(name))[0]


def families() -> dict[str, Family]:
    """Registered families by name."""
    _load_families()
    return dict(_FAMILIES)


# --------------------------------------------------------------------------- helpers
def _load_families() -> None:
    """Import :data:`FAMILY_MODULES` (once): each registers its families and presets."""
    for module in FAMILY_MODULES:
        importlib.import_module(module)


def _lookup(name: str) -> tuple[Family, dict, int]:
    if name in _FAMILIES:
        fam = _FAMILIES[name]
        return fam, {}, fam.default_batch_size
    preset = _PRESETS[name]
    fam = _FAMILIES[preset.family]
    return fam, preset.knobs, preset.batch_size or fam.default_batch_size


def _spec(name: str) -> ModelSpec:
    family, base, batch_size = _lookup(name)
    knobs = {k.name: base.get(k.name, k.default) for k in family.knobs}
    if name in _PRESETS:
        preset = _PRESETS[name]
        return ModelSpec(name, family.name, preset.description, knobs, preset.full_size, batch_size)
    return ModelSpec(name, family.name, family.description, knobs, False, batch_size)


def _check_name(name: str) -> str:
    _load_families()
    if isinstance(name, str) and (name in _FAMILIES or name in _PRESETS):
        return name
    if not isinstance(name, str):
        raise DripleError(f"a model name is a string like 'resnet50', got {name!r}. Run `driple zoo` to list them.")
    known = sorted(_FAMILIES) + sorted(_PRESETS)
    key = name.lower().replace("-", "_")
    if key in _FAMILIES or key in _PRESETS:
        hint = f"Did you mean {key!r}?"
    else:
        close = difflib.get_close_matches(key, known, n=4, cutoff=0.5)
        hint = f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        hint += f"Families: {', '.join(sorted(_FAMILIES))}."
    raise DripleError(
        f"unknown model {name!r}. {hint} Run `driple zoo` (or driple.zoo.list_models()) "
        "to see every model name and its knobs."
    )


def _check_batch_size(batch_size: Any) -> int:
    try:
        value = _convert(batch_size, 1)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DripleError(f"batch_size must be a positive integer (samples per step), got {batch_size!r}")
    return value


def _resolve_knobs(name: str, family: Family, base: dict, overrides: dict) -> dict:
    valid = [k.name for k in family.knobs]
    unknown = [k for k in overrides if k not in valid]
    if unknown:
        bad = unknown[0]
        close = difflib.get_close_matches(bad, valid, n=2, cutoff=0.5)
        hint = f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        listing = "; ".join(f"{k.name}={k.default!r} ({k.help})" for k in family.knobs)
        raise DripleError(
            f"model {name!r} has no knob {bad!r}. {hint}Its knobs (default, meaning) are: {listing}."
        )
    config = {}
    for knob in family.knobs:
        raw = overrides.get(knob.name, base.get(knob.name, knob.default))
        config[knob.name] = _check_knob(name, knob, raw)
    if family.validate is not None:
        problem = family.validate(config)
        if problem:
            raise DripleError(f"model {name!r}: {problem}. Change the knobs and try again.")
    return config


def _check_knob(name: str, knob: Knob, raw: Any) -> Any:
    what = _type_name(knob.default)
    try:
        value = _convert(raw, knob.default)
    except (TypeError, ValueError):
        raise DripleError(
            f"model {name!r}: knob {knob.name} takes {what} ({knob.help}), got {raw!r}. "
            f"Its default is {knob.default!r}."
        ) from None
    problem = None
    if knob.choices is not None and value not in knob.choices:
        problem = f"must be one of {', '.join(repr(c) for c in knob.choices)}"
    elif knob.check is not None:
        problem = knob.check(value)
    if problem:
        raise DripleError(
            f"model {name!r}: knob {knob.name}={raw!r} is not valid: {problem} ({knob.help}). "
            f"Its default is {knob.default!r}."
        )
    return value


def _type_name(default: Any) -> str:
    if isinstance(default, bool):
        return "true/false"
    if isinstance(default, tuple):
        return "a list of integers like 6,12,24"
    return {int: "an integer", float: "a number", str: "a word"}[type(default)]


def _convert(raw: Any, default: Any) -> Any:
    """``raw`` as the type of ``default``; strings are parsed. Raises ValueError/TypeError."""
    kind = type(default)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
            return raw.strip().lower() in ("true", "yes", "1")
        if isinstance(raw, int) and raw in (0, 1):
            return bool(raw)
        raise ValueError(raw)
    if kind is int:
        if isinstance(raw, bool):
            raise TypeError(raw)
        if isinstance(raw, str):
            raw = raw.strip()
            return int(raw)
        if isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        return int(raw)
    if kind is float:
        if isinstance(raw, bool):
            raise TypeError(raw)
        return float(raw.strip() if isinstance(raw, str) else raw)
    if kind is tuple:
        if isinstance(raw, str):
            raw = [p for p in raw.replace("(", "").replace(")", "").split(",") if p.strip()]
        if not isinstance(raw, (list, tuple)) or not raw:
            raise TypeError(raw)
        return tuple(_convert(v, 1) for v in raw)
    if kind is str:
        if not isinstance(raw, str):
            raise TypeError(raw)
        return raw.strip().lower()
    raise TypeError(kind)
