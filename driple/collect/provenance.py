"""Where and how a dataset was measured: ``provenance.json`` beside ``results.csv``.

Figures of a collector dataset only mean something with the machine they came from. The
file holds the host (CPU model, cores, memory, kernel), the software (torch, driple, python)
and one entry per collector invocation that wrote into the dataset (date, command line).
"""
from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

from driple.collect.files import write_json


def script_stamp(script: str, argv=None, host: bool = True) -> dict:
    """When and how a script wrote a result file: ``date`` (UTC, to the minute), ``command``
    (``python scripts/<script>`` and its arguments: ``argv``, default this process's), and with
    ``host`` the machine's name and CPU model (a figure only means something with them)."""
    import time

    words = ["python", f"scripts/{script}", *(sys.argv[1:] if argv is None else argv)]
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(words)}
    if host:
        from driple.hardware.host_speed import cpu_model

        out.update(host=platform.node(), cpu_model=cpu_model())
    return out


def host_facts() -> dict:
    """This machine and its software: CPU model, cores, memory (bytes), kernel, versions."""
    from driple.hardware.host_speed import cpu_model  # no torch import behind it

    try:
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        mem = None
    from importlib import metadata

    try:  # the version without importing torch (seconds on a loaded host)
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    from driple import __version__

    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": mem,
        "kernel": platform.release(),
        "os": platform.platform(),
        "gpus": _gpu_names(),
        "python": platform.python_version(),
        "torch": torch_version,
        "driple": __version__,
    }


def _gpu_names() -> list[str]:
    """GPU models through NVML when it is installed (cheap); [] on CPU-only hosts."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML, no GPU
        return []
    try:
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else name)
        return names
    finally:
        pynvml.nvmlShutdown()


def record(out_dir: str | os.PathLike, command: list[str] | None = None, **extra) -> Path:
    """Add this invocation to ``<out_dir>/provenance.json`` (created with the host facts)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "provenance.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    facts = host_facts()
    data.setdefault("host", facts)
    if data["host"] != facts:  # a dataset extended on another machine/software: say so
        data.setdefault("other_hosts", [])
        if facts not in data["other_hosts"]:
            data["other_hosts"].append(facts)
    data.setdefault("runs", []).append({
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command if command is not None else _command_line(),
        **extra,
    })
    return write_json(path, data)


def _command_line() -> list[str]:
    name = Path(sys.argv[0]).name
    if name == "__main__.py":  # python -m driple
        name = "driple"
    return [name, *sys.argv[1:]]
