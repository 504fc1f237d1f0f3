"""What to run: a job specification, its stable id, and the result of running it.

A :class:`JobSpec` names the model (a zoo name, or ``module:function`` / ``path/to/file.py:function``
for the user's own code), its knobs, batch size, optimizer and the seed. Together with a
setting and the measurement length it gives a stable :func:`job_id`, so a sweep that is
restarted recognises the jobs it has already done. :meth:`JobSpec.parse` reads the one-line
form ``MODEL[,knob=value...]`` that the command line and co-run grids use.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from driple.errors import DripleError
from driple.zoo.optim import OPTIMIZERS


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


@dataclass
class JobSpec:
    """One training job.

    model: zoo name (``driple zoo``) or ``module:function`` / ``file.py:function`` returning a
        workload (``model``, ``make_batch``, ``loss_fn``) or an ``nn.Module`` with an
        ``input_shape`` attribute (shape of one sample; the loss is then the mean square output).
    batch_size: samples per worker per iteration (None: the model's default).
    optimizer: a name of :data:`driple.zoo.optim.OPTIMIZERS`; lr: learning rate (None: the optimizer default).
    knobs: keyword arguments of the model builder (e.g. ``{"depth": 8}``).
    seed: seeds weights and synthetic data (worker ``r`` draws its data with ``seed + r``).
    warmup: iterations run before measurement starts (excluded from every figure).
    iterations: measured iterations per worker; None lets ``seconds`` decide.
    """

    model: str
    batch_size: int | None = None
    optimizer: str = "sgd"
    lr: float | None = None
    knobs: dict = field(default_factory=dict)
    seed: int = 0
    warmup: int = 5
    iterations: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise DripleError("a job needs a model: a zoo name or 'module:function'")
        self.optimizer = str(self.optimizer).lower()
        if self.optimizer not in OPTIMIZERS:
            raise DripleError(
                f"unknown optimizer {self.optimizer!r}; use one of {', '.join(OPTIMIZERS)}"
            )
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise DripleError("batch size must be a positive number of samples")
        if self.warmup < 1:
            raise DripleError("warm-up needs at least 1 iteration (the first one is never typical)")
        if self.iterations is not None and self.iterations < 1:
            raise DripleError("iterations must be at least 1")
        self.knobs = dict(self.knobs or {})

    @property
    def is_user_code(self) -> bool:
        """True when ``model`` names the user's own ``module:function``."""
        return ":" in self.model

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def parse(cls, text: str, **fields) -> "JobSpec":
        """``"resnet,depth=56,bs=64,opt=adam"`` -> the job: a model (zoo name or
        ``module:function``) then comma-separated ``knob=value`` pairs, where ``bs`` and ``opt``
        set the batch size and optimizer; ``fields`` set other fields (e.g. ``warmup``)."""
        model, *pairs = [p.strip() for p in text.split(",")]
        if not model or "=" in model:
            raise DripleError(f"cannot read job {text!r}; write MODEL[,knob=value...], e.g. resnet50,bs=32")
        knobs = parse_knobs(pairs)
        batch_size = knobs.pop("bs", None)
        optimizer = str(knobs.pop("opt", "sgd"))
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise DripleError(f"bs={batch_size!r} in job {text!r} is not a positive integer")
        if optimizer not in OPTIMIZERS:
            raise DripleError(f"opt={optimizer!r} in job {text!r}: use "
                              f"{', '.join(OPTIMIZERS[:-1])} or {OPTIMIZERS[-1]}")
        return cls(model=model, knobs=knobs, batch_size=batch_size, optimizer=optimizer, **fields)

    @classmethod
    def from_dict(cls, data: dict) -> "JobSpec":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if "model" not in known and "name" in data:  # zoo.sweep_configs() spelling
            known["model"] = data["name"]
        return cls(**known)


def job_id(spec: JobSpec, setting_id: str, seconds: float) -> str:
    """Stable, readable id of a job: ``<model>-bs<batch>-<hash of everything>`` (``bsdefault``
    when the model's default batch size is used).

    The same spec in the same setting measured for the same time always gets the same id.
    """
    key = json.dumps(
        {"spec": spec.to_dict(), "setting": setting_id, "seconds": float(seconds)},
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    stem = re.sub(r"[^A-Za-z0-9_.]+", "_", spec.model.rsplit(":", 1)[-1])[:32]
    bs = spec.batch_size if spec.batch_size is not None else "default"  # the model's own
    return f"{stem}-bs{bs}-{digest}"


@dataclass
class JobResult:
    """Outcome of one job: the result-table row and where its raw data lives.

    row: one ``results.csv`` row (see :data:`driple.collect.results.BASE_COLUMNS`).
    raw_path: sampler counters (``raw/<job_id>.npz``), None when nothing was sampled.
    detail_path: per-worker labels, iteration and bucket logs (``raw/<job_id>.json``).
    """

    row: dict
    raw_path: Path | None
    detail_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.row.get("status") == "ok"

    @property
    def job_id(self) -> str:
        return self.row["job_id"]


class JobInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) arrived during a job; ``result`` holds the failed row, already cleaned up."""

    def __init__(self, result: JobResult):
        super().__init__("job interrupted")
        self.result = result
