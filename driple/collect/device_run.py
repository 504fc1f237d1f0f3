"""A budgeted chunk of a sweep on a lent machine, packed to come back, and landed in a dataset.

A lent GPU machine runs one command of at most 10 minutes and gives back at most 8 files of
16 MiB from ``$OUT``. :func:`run_chunk` measures the next grid points of a fixed grid until a
deadline, skipping the points already landed (the landed ``results.csv`` travels with the
checkout; the raw files need not), and :func:`pack` writes the new rows with their raw files,
the machine's spec and the points still to do into at most that many files. Back on the
workstation :func:`land` appends the rows and their raw files to the dataset, which is how
the next chunk knows where to resume. Nothing is typed in by hand: every row comes from a job
that ran, with the spec probed before it.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import tarfile
import time
from pathlib import Path

from driple.collect.results import ResultTable
from driple.errors import DripleError

MAX_FILES = 8
MAX_FILE_BYTES = 16 * 1024 * 1024
PART = "rows.tar.xz.{:02d}"


def stratified_grid(source: str | Path, setting: str, max_seconds: float = 60.0) -> dict:
    """The jobs of a grid file with its families taken in turn (every prefix of the result is
    family-stratified: a chunk cut short still covers the families), for ``setting``."""
    import yaml

    doc = yaml.safe_load(Path(source).read_text())
    families: dict = {}
    for job in doc["jobs"]:
        families.setdefault(job["model"], []).append(job)
    jobs = []
    while any(families.values()):
        for queue in families.values():
            if queue:
                jobs.append(queue.pop(0))
    return {"setting": setting, "seconds": doc.get("seconds", 6.0), "warmup": doc.get("warmup", 5),
            "min_iterations": doc.get("min_iterations", 20), "max_seconds": float(max_seconds), "jobs": jobs}


def run_chunk(grid, setting: str, landed: str | Path, work: str | Path, minutes: float,
              max_seconds: float = 60.0, progress: bool = False) -> dict:
    """Measure grid points of ``setting`` not in ``landed`` (a dataset directory, possibly empty)
    into ``work`` until ``minutes`` have passed (no job starts after); returns the sweep's counts
    with ``new`` (the job ids measured now) and ``remaining`` (grid points still to do)."""
    from driple.collect.sweep import load_grid, run_sweep

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    landed = Path(landed)
    before = set()
    if (landed / "results.csv").exists():  # resume: what is landed counts as done
        shutil.copy(landed / "results.csv", work / "results.csv")
        _, rows = ResultTable(work).raw_rows()
        before = {r["job_id"] for r in rows}
    grid_doc = load_grid(grid) if not isinstance(grid, dict) else grid
    counts = run_sweep(grid_doc, work, setting, progress=progress, max_seconds=max_seconds,
                       until=time.monotonic() + 60.0 * float(minutes), allow_other_hardware=True)
    _, rows = ResultTable(work).raw_rows()
    done = {r["job_id"] for r in rows if r.get("status") == "ok"}
    from driple.collect.job import job_id

    seconds = float(grid_doc.get("seconds") or 10.0)
    ids = [job_id(spec, setting, seconds) for spec in grid_doc["jobs"]]
    counts["new"] = sorted({r["job_id"] for r in rows} - before)
    counts["remaining"] = [i for i in ids if i not in done]
    return counts


def pack(work: str | Path, out: str | Path, new_ids, extra: dict | None = None) -> list[Path]:
    """The rows of ``new_ids`` in ``work`` with their raw files, as an xz tar split into parts
    of at most 16 MiB under ``out``, and ``chunk.json`` (``extra``: spec, counts, remaining).
    Refuses to write more than :data:`MAX_FILES` files."""
    work, out = Path(work), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    columns, rows = ResultTable(work).raw_rows()
    wanted = set(new_ids)
    keep = [r for r in rows if r["job_id"] in wanted]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        table = io.StringIO()
        writer = csv.DictWriter(table, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(keep)
        _add_bytes(tar, "results.csv", table.getvalue().encode())
        for name in ("provenance.json", "grid.yaml"):
            if (work / name).exists():
                tar.add(work / name, arcname=name)
        for r in keep:
            for f in sorted((work / "raw").glob(f"{r['job_id']}.*")):
                tar.add(f, arcname=f"raw/{f.name}")
    data = buf.getvalue()
    parts = [data[i:i + MAX_FILE_BYTES] for i in range(0, len(data), MAX_FILE_BYTES)] or [b""]
    if len(parts) + 1 > MAX_FILES:
        raise DripleError(f"{len(data) >> 20} MiB of rows need {len(parts)} parts: over the "
                          f"{MAX_FILES} files a lent machine gives back; run a shorter chunk")
    written = []
    for i, part in enumerate(parts):
        path = out / PART.format(i)
        path.write_bytes(part)
        written.append(path)
    info = {"rows": len(keep), "parts": len(parts), **(extra or {})}
    (out / "chunk.json").write_text(json.dumps(info, indent=2, default=str))
    return written + [out / "chunk.json"]


def _add_bytes(tar, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def read_chunk(files: str | Path) -> dict:
    """A packed chunk's ``chunk.json``; a one-line :class:`DripleError` when there is none."""
    try:
        return json.loads((Path(files) / "chunk.json").read_text())
    except (OSError, ValueError) as exc:
        raise DripleError(f"{files} holds no readable chunk.json ({exc})") from None


def land(files: str | Path, dest: str | Path) -> dict:
    """Append a packed chunk (``files``: the folder holding its parts and ``chunk.json``) to the
    dataset ``dest``: its rows to ``results.csv`` (rows already there are left), its raw files to
    ``raw/``, the chunk's record to ``provenance.json``'s ``device_chunks``."""
    files, dest = Path(files), Path(dest)
    info = read_chunk(files)
    data = b"".join((files / PART.format(i)).read_bytes() for i in range(int(info["parts"])))
    dest.mkdir(parents=True, exist_ok=True)
    table = ResultTable(dest)
    _, have = table.raw_rows()
    known = {r["job_id"] for r in have}
    added = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        rows = list(csv.DictReader(io.TextIOWrapper(tar.extractfile("results.csv"), "utf-8")))
        for member in tar.getmembers():
            if member.name.startswith("raw/") and member.isfile() and "/" not in member.name[4:]:
                target = dest / "raw" / member.name[4:]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
            elif member.name == "grid.yaml" and not (dest / "grid.yaml").exists():
                (dest / "grid.yaml").write_bytes(tar.extractfile(member).read())
    for r in rows:
        if r["job_id"] not in known:
            table.append(r)
            added += 1
    prov_path = dest / "provenance.json"
    prov = json.loads(prov_path.read_text()) if prov_path.exists() else {}
    prov.setdefault("device_chunks", []).append({k: v for k, v in info.items() if k != "parts"})
    prov_path.write_text(json.dumps(prov, indent=2))
    return {"added": added, "rows": len(rows), "remaining": len(info.get("remaining", []))}
