"""What driple measures and predicts, declared once: the resources and the targets.

A :class:`Resource` (compute, memory, network TX, network RX) is sampled as a rate series per
worker and predicted as three targets, ``<resource>_burst_amount`` (in the resource's unit),
``<resource>_burst_duration`` and ``<resource>_idle_duration`` (s: mean length of a run of
burst / idle samples), e.g. ``tx_burst_amount``. A job-level :class:`Target` (such as a step
time) is one more number per job with its own unit, declared with :func:`register_target`.

Every stage reads this declaration, in its order: the collector's rate columns
(:mod:`driple.collect.series`), the labeller's gaps, the dataset's target columns, the
inspector's output width and the target names its checkpoint records, the profile and its
words, the bounds, the co-location capacities and the command line's tables.

Units:
- compute: % of the device (GPU: NVML utilization.gpu; CPU: process-tree CPU time / wall time /
  cores allotted to the worker, x100)
- memory: sampled as % (GPU: NVML utilization.memory; CPU: worker RSS as % of host memory); its
  burst amount is that % in labels v1 and the peak allocated MB in labels v2 (a resource's
  ``amount_unit`` can differ from the unit of its sampled rate)
- tx, rx: MB/s (1 MB = 1e6 bytes) sent / received by one worker
- burst_duration, idle_duration: seconds (mean length of a run of burst / idle samples)
- step_time (labels v2 only): s, the median iteration period

Two declarations of the labels exist (:data:`LABEL_VERSIONS`): ``"v1"`` (the 12 k-means labels
of the shipped datasets and inspectors: memory amount in %, no step time) and ``"v2"`` (the
timeline labels: memory amount in MB, plus the job-level target ``step_time``).
:data:`DECLARED_LABELS` chooses the live one at import; :func:`use_labels` switches (tests do,
inside a test). Checkpoints record the version they were trained on and are refused under the
other one.

``RESOURCES``, ``METRICS`` (the resources' burst/idle targets), ``TARGETS`` and ``UNITS`` read
the declaration when they are looked up on this module; library code calls the functions
(:func:`resource_names`, :func:`target_names`, ...) so that a registration made later counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional, Union

from driple.errors import DripleError

KINDS = ("burst_amount", "burst_duration", "idle_duration")
#: Burst-amount caps that are not a number: the training jobs' largest value, the link's rate.
TRAINING_MAX, LINK_RATE = "training max", "link rate"
#: What a resource's co-location capacity is counted in (:func:`driple.predict.colocate.host_capacity`).
CAPACITIES = ("cores", "memory", "link")
#: A burst-amount cap: the memory of the host the inspector was trained for (MB; from the host
#: figures recorded in its checkpoint, :mod:`driple.hardware.host_speed`).
HOST_MEMORY = "host memory"
#: The label declarations driple knows (see the module docstring) and the one declared at import.
LABEL_VERSIONS = ("v1", "v2")
DECLARED_LABELS = "v2"


@dataclass(frozen=True)
class Resource:
    """A resource every worker uses, as sampled, labelled, predicted and shown.

    Args:
        name: Column name (``tx``); its targets are ``tx_burst_amount`` etc.
        unit: Unit of its rate and burst amount (``%``, ``MB/s``).
        title: The resource in sentences (``network TX``).
        short: The resource in tables and short sentences (``TX``).
        amount_words: By device kind (``cpu``/``gpu``), an amount in words with ``{}`` for the
            number: ``{}% of a core``.
        axis_label: By device kind, the label of a plot axis of its series.
        amount_unit: Unit of its burst amount when it is not the rate's (memory in labels v2:
            sampled as RSS %, its amount the peak allocated ``MB``); empty: ``unit``.
        priors: By target kind (``burst_amount``, ``burst_duration``, ``idle_duration``), the
            graph-level prior of that target (a name of
            :data:`driple.graph.summary_features.PRIORS`, in the target's unit): a hybrid
            inspector may predict the target as that prior times a learned factor.
        rate: By device kind, how the collector turns raw counters into the rate column:
            ``(kind, counter)`` with ``kind`` one of :data:`driple.collect.series.RATE_KINDS`
            (``cpu_time``, ``host_share``, ``bytes``, ``nvml``) and ``counter`` the sampler's
            counter (``cpu_ns``, ``rss_bytes``, ``tx_bytes``) or NVML kind (``gpu``, ``memory``).
        min_gap: Labeller: two k-means centres closer than this (unit of the resource) are one
            level.
        cap: By device kind, the physical upper bound of a burst amount: a number,
            :data:`TRAINING_MAX` (the largest any training job reached), :data:`LINK_RATE` or
            :data:`HOST_MEMORY`; missing: none.
        cap_reason: Words that explain a numeric cap (``all of the memory``).
        capacity: What a co-location slot of it is counted in (one of :data:`CAPACITIES`), or
            None (not checked for overload).
        level_on: Device kinds on which the resource is a level rather than an on/off demand
            (memory on CPU hosts: RSS never drops to 0), mapped to what the level is (``RSS``):
            its idle level is then the burst amount.
        network: Carried by the worker's link (its burst pattern is the network's).
    """

    name: str
    unit: str
    title: str
    short: str
    amount_words: Mapping[str, str]
    axis_label: Mapping[str, str]
    rate: Mapping[str, tuple]
    min_gap: float
    cap: Mapping[str, Union[float, str]] = field(default_factory=dict)
    cap_reason: str = ""
    capacity: Optional[str] = None
    level_on: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    amount_unit: str = ""
    priors: Mapping[str, str] = field(default_factory=dict)

    @property
    def amount(self) -> str:
        """Unit of the burst amount (and of a co-location capacity): ``amount_unit`` or ``unit``."""
        return self.amount_unit or self.unit

    def words(self, value: str, device: str) -> str:
        """An amount (already formatted) in words on a ``device`` kind host."""
        return self.amount_words.get(device, "{} " + self.amount).format(value)


@dataclass(frozen=True)
class Target:
    """One number the inspector predicts per job.

    Args:
        name: Column name in results tables, datasets, checkpoints and profiles.
        unit: Its unit (``s``, ``MB/s``).
        label: In words (``burst duration``, ``step time``).
        resource: The resource whose burst/idle pattern it describes (None: job-level).
        kind: One of :data:`KINDS` for a resource's target.
        raise_to_training_min: Bounds: a prediction below the training jobs' smallest value
            is shown as that value (durations are measured in whole samples: none is shorter).
        prior: The graph-level prior of this target (a name of
            :data:`driple.graph.summary_features.PRIORS`, same unit), or None.
    """

    name: str
    unit: str
    label: str
    resource: Optional[str] = None
    kind: Optional[str] = None
    raise_to_training_min: bool = False
    prior: Optional[str] = None


_RESOURCES: dict[str, Resource] = {}
_TARGETS: dict[str, Target] = {}


def register_resource(resource: Resource) -> Resource:
    """Declare a resource and its three burst/idle targets (after the targets declared so far)."""
    if resource.name in _RESOURCES or any(t.startswith(resource.name + "_") for t in _TARGETS):
        raise ValueError(f"resource {resource.name!r} declared twice")
    if resource.capacity is not None and resource.capacity not in CAPACITIES:
        raise ValueError(f"capacity {resource.capacity!r} is none of {CAPACITIES}")
    _RESOURCES[resource.name] = resource
    for t in _resource_targets(resource):
        register_target(t)
    return resource


def _resource_targets(resource: Resource) -> list[Target]:
    out = []
    for kind in KINDS:
        amount = kind == "burst_amount"
        out.append(Target(f"{resource.name}_{kind}", resource.amount if amount else "s",
                          kind.replace("_", " "), resource=resource.name, kind=kind,
                          raise_to_training_min=not amount, prior=resource.priors.get(kind)))
    return out


def redeclare_resource(resource: Resource) -> Resource:
    """Replace a declared resource (same name) and its three targets, keeping their places in
    the order of the targets (how :func:`use_labels` changes memory's amount unit)."""
    if resource.name not in _RESOURCES:
        raise ValueError(f"resource {resource.name!r} is not declared")
    _RESOURCES[resource.name] = resource
    for t in _resource_targets(resource):
        _TARGETS[t.name] = t  # an existing key keeps its position in the dict
    return resource


def register_target(target: Target) -> Target:
    """Declare one more predicted target (a job-level one: ``resource=None``)."""
    if target.name in _TARGETS:
        raise ValueError(f"target {target.name!r} declared twice")
    if target.resource is not None and target.resource not in _RESOURCES:
        raise ValueError(f"target {target.name!r} names an undeclared resource {target.resource!r}")
    _TARGETS[target.name] = target
    return target


def unregister(name: str) -> None:
    """Remove a target, or a resource with its targets (tests declare toy ones)."""
    if name in _RESOURCES:
        del _RESOURCES[name]
        for t in [t for t in _TARGETS.values() if t.resource == name]:
            del _TARGETS[t.name]
    _TARGETS.pop(name, None)


def resources() -> tuple[Resource, ...]:
    """The declared resources, in order."""
    return tuple(_RESOURCES.values())


def resource_names() -> tuple[str, ...]:
    return tuple(_RESOURCES)


def resource(name: str) -> Resource:
    """The resource called ``name``; a :class:`DripleError` naming the known ones otherwise."""
    try:
        return _RESOURCES[name]
    except (KeyError, TypeError):
        raise DripleError(f"unknown resource {name!r}; use one of {', '.join(_RESOURCES)}") from None


def targets() -> tuple[Target, ...]:
    """Everything the inspector predicts, in the order of its outputs."""
    return tuple(_TARGETS.values())


def target_names() -> tuple[str, ...]:
    return tuple(_TARGETS)


def target(name: str) -> Target:
    """The target called ``name``; a :class:`DripleError` otherwise."""
    try:
        return _TARGETS[name]
    except (KeyError, TypeError):
        raise DripleError(f"unknown target {name!r}; driple predicts {', '.join(_TARGETS)}") from None


def unit(name: str) -> str:
    """Unit of a target column, e.g. ``unit('tx_burst_amount') == 'MB/s'``."""
    return target(name).unit


def target_units() -> dict:
    """``{target: unit}`` of the declared targets, in order (checkpoints record it)."""
    return {t.name: t.unit for t in _TARGETS.values()}


def __getattr__(name: str):
    """``RESOURCES``, ``METRICS``, ``TARGETS``, ``UNITS``: the declaration as it is now."""
    if name == "RESOURCES":
        return resource_names()
    if name == "METRICS":
        return tuple(t.name for t in _TARGETS.values() if t.resource is not None)
    if name == "TARGETS":
        return target_names()
    if name == "UNITS":
        return {r.name: r.unit for r in _RESOURCES.values()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------- the declaration
register_resource(Resource(
    "compute", unit="%", title="compute", short="compute",
    amount_words={"cpu": "{}% of a core", "gpu": "{}% GPU utilisation"},
    axis_label={"cpu": "compute (% of a core)", "gpu": "compute (% GPU)"},
    rate={"cpu": ("cpu_time", "cpu_ns"), "gpu": ("nvml", "gpu")},
    min_gap=1.0,
    priors={"burst_duration": "prior_busy_s", "idle_duration": "prior_step_s"},
    # a CPU worker's process tree counts its gloo threads too: it can pass 100 % of its core
    cap={"cpu": TRAINING_MAX, "gpu": 100.0}, cap_reason="its physical bound",
    capacity="cores",
))
register_resource(Resource(
    "memory", unit="%", title="memory", short="memory",
    amount_words={"cpu": "{}% of host memory", "gpu": "{}% memory-controller utilisation"},
    axis_label={"cpu": "memory (% of host)", "gpu": "memory (% busy)"},
    rate={"cpu": ("host_share", "rss_bytes"), "gpu": ("nvml", "memory")},
    min_gap=0.01,
    priors={"burst_amount": "prior_memory_pct", "burst_duration": "prior_step_s",
            "idle_duration": "prior_step_s"},
    cap={"cpu": 100.0, "gpu": 100.0}, cap_reason="all of the memory",
    capacity="memory",
    level_on={"cpu": "RSS"},
))
for _name, _title in (("tx", "TX"), ("rx", "RX")):
    register_resource(Resource(
        _name, unit="MB/s", title=f"network {_title}", short=_title,
        amount_words={},  # "<number> MB/s"
        axis_label={"cpu": f"{_title} (MB/s)", "gpu": f"{_title} (MB/s)"},
        rate={"cpu": ("bytes", f"{_name}_bytes"), "gpu": ("bytes", f"{_name}_bytes")},
        min_gap=0.1,
        priors={"burst_amount": "link_mb_s", "burst_duration": "prior_comm_s",
                "idle_duration": "prior_step_s"},
        cap={"cpu": LINK_RATE, "gpu": LINK_RATE},
        capacity="link",
        network=True,
    ))
del _name, _title


# ---------------------------------------------------------------------- label versions
_V1_MEMORY = _RESOURCES["memory"]
#: Memory in labels v2: still sampled as RSS % (the collector's rate column), but its burst amount
#: is the peak allocated MB of an iteration (the CPU allocator's statistics; the CUDA caching
#: allocator's on GPUs), capped by the host's memory.
_V2_MEMORY = replace(
    _V1_MEMORY, amount_unit="MB",
    amount_words={"cpu": "{} MB", "gpu": "{} MB"},
    level_on={"cpu": "peak allocated", "gpu": "peak allocated"},  # allocations persist between bursts
    cap={"cpu": HOST_MEMORY, "gpu": HOST_MEMORY}, cap_reason="all of the host's memory",
    priors={**_V1_MEMORY.priors, "burst_amount": "prior_memory_mb"})
#: The job-level target of labels v2: the median iteration period of a worker.
STEP_TIME = Target("step_time", unit="s", label="step time", prior="prior_step_s")
_labels = "v1"


def label_version() -> str:
    """The label declaration in force: ``"v1"`` or ``"v2"`` (see the module docstring)."""
    return _labels


def use_labels(version: str) -> None:
    """Switch the declaration to labels ``version`` (:data:`LABEL_VERSIONS`).

    ``"v2"`` gives memory its amount in MB and adds the target ``step_time`` (s) after the 12;
    ``"v1"`` restores the 12 targets with memory in %. Other registrations are kept.
    """
    global _labels
    if version not in LABEL_VERSIONS:
        raise DripleError(f"unknown label version {version!r}; use one of {', '.join(LABEL_VERSIONS)}")
    redeclare_resource(_V2_MEMORY if version == "v2" else _V1_MEMORY)
    if version == "v2" and STEP_TIME.name not in _TARGETS:
        register_target(STEP_TIME)
    elif version == "v1":
        _TARGETS.pop(STEP_TIME.name, None)
    _labels = version


use_labels(DECLARED_LABELS)
