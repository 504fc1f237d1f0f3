"""Which machine measured each row of a dataset.

A row collected with a probe carries its spec in the ``hardware`` column (JSON of a
:class:`~driple.hardware.spec.HardwareSpec`, probed right before the job). Rows of datasets
measured before specs existed have none; their dataset's ``provenance.json`` keeps the figures
measured on the collecting host (``host_speed``), which stand for every such row. A row with
neither names no machine and is refused by its job id: its labels cannot be put beside a spec.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.hardware.spec import HardwareSpec

SPEC_COLUMN = "hardware"


def recorded_provenance(dataset_dir: str | Path) -> tuple[Optional[HostSpeed], dict]:
    """``(host figures, host facts)`` a dataset's ``provenance.json`` records (``host_speed``,
    ``host``; measured on the host that measured its jobs): ``(None, {})`` without them."""
    try:
        provenance = json.loads((Path(dataset_dir) / "provenance.json").read_text())
        record = provenance.get("host_speed")
    except (OSError, ValueError, AttributeError):
        return None, {}
    if not record:
        return None, {}
    return HostSpeed.from_dict(record), provenance.get("host") or {}


def recorded_spec(dataset_dir: str | Path) -> Optional[HardwareSpec]:
    """The spec of a dataset's recorded host figures (``provenance.json`` → ``host_speed``), or None."""
    speed, host = recorded_provenance(dataset_dir)
    if speed is None:
        return None
    path = Path(dataset_dir) / "provenance.json"
    return HardwareSpec.from_host_speed(speed, how=f"recorded in {path}: {speed.how}".rstrip(": "),
                                        cores=host.get("cores_usable") or host.get("cores"))


def row_spec(row, fallback: Optional[HardwareSpec] = None) -> Optional[HardwareSpec]:
    """The spec a row names (its ``hardware`` column), else ``fallback``; None if neither."""
    text = row.get(SPEC_COLUMN) if hasattr(row, "get") else None
    if text is None or (isinstance(text, float) and math.isnan(text)) or text == "":
        return fallback
    try:
        return HardwareSpec.from_dict(json.loads(text) if isinstance(text, str) else text)
    except ValueError as exc:
        raise DripleError(f"job {row.get('job_id', '?')}: its hardware spec is not JSON ({exc})") from None


def dataset_specs(frame, dataset_dir: str | Path) -> list[HardwareSpec]:
    """One spec per row of ``frame`` (a dataset's results table); refuses, by job id, a row that
    names no machine (no ``hardware`` column value and no recorded host figures)."""
    fallback = recorded_spec(dataset_dir)
    out = []
    for row in frame.to_dict("records"):
        spec = row_spec(row, fallback)
        if spec is None:
            raise DripleError(
                f"job {row.get('job_id', '?')} of {dataset_dir} names no machine: it has no hardware "
                "spec and the dataset's provenance.json records no host_speed; collect it again "
                "(rows carry their spec), or add the collecting host's figures as host_speed")
        out.append(spec)
    return out


def machines(specs: list[HardwareSpec]) -> list[dict]:
    """The machines of a dataset: ``[{"cpu_model", "rows", "gpus"}]``, most rows first."""
    counts: dict = {}
    for s in specs:
        key = (s.cpu_model, tuple(g.name for g in s.gpus))
        counts[key] = counts.get(key, 0) + 1
    return [{"cpu_model": k[0], "gpus": list(k[1]), "rows": n}
            for k, n in sorted(counts.items(), key=lambda kv: -kv[1])]


def median_spec(specs: Sequence[HardwareSpec]) -> HardwareSpec:
    """One spec for many probes of one machine: the median of each rate; the rest of the first."""
    first = specs[0]
    rates = {d: float(np.median([s.matmul_flops_per_s.get(d, np.nan) for s in specs]))
             for d in first.matmul_flops_per_s}
    return replace(first, matmul_flops_per_s=rates,
                   copy_bytes_per_s=float(np.median([s.copy_bytes_per_s for s in specs])),
                   cores_available=float(np.median([s.cores_available for s in specs])),
                   how=f"median of {len(specs)} row probes")


def training_machine_spec(dataset_dir: str | Path, jobs: Optional[Sequence[str]] = None) -> Optional[HardwareSpec]:
    """The machine an inspector trained on ``jobs`` of a dataset describes: the dataset's recorded
    host figures, else the median of the probes its rows (those of ``jobs``) carry; None if
    neither exists. A dataset of rows probed one by one records no host figures of its own."""
    recorded = recorded_spec(dataset_dir)
    if recorded is not None:
        return recorded
    from driple.csvtable import read_csv

    path = Path(dataset_dir) / "results.csv"
    if not path.exists():
        return None
    frame = read_csv(path)
    if SPEC_COLUMN not in frame:
        return None
    if jobs is not None:
        frame = frame[frame["job_id"].isin(set(jobs))]
    specs = [s for s in (row_spec(r) for r in frame.to_dict("records")) if s is not None]
    if not specs:
        return None
    return replace(median_spec(specs), how=f"median of the probes of {len(specs)} rows of {dataset_dir}")
