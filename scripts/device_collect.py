"""Measure the next chunk of a GPU grid on a lent machine, and land what comes back.

On the lent machine (one command, at most 10 minutes; files come back only from ``$OUT``)::

    python3 scripts/device_collect.py run --setting gpu-ddp-w1-lo --minutes 7 --out "$OUT"

installs driple against the machine's own torch (no downloads), probes the machine, measures
grid points of ``datasets/gpu/grid.yaml`` not yet landed for this GPU until the minutes are up,
and packs the new rows with their raw files, the spec and the points still to do into at most
8 files. Back here::

    python scripts/device_collect.py land /work/.device/<files_at>

appends them to ``datasets/gpu-<gpu>/<setting>/`` (the GPU named by the spec the chunk
carries), which is where the next run resumes. ``--dry-run`` measures the CPU twin of the
setting (``cpu-…``) instead, so the whole path runs in the test suite on a machine without GPU.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "datasets" / "gpu" / "grid.yaml"


def ensure_driple() -> None:
    """Install this checkout against the interpreter's packages, offline, if it is not importable."""
    if importlib.util.find_spec("driple") is None:
        if os.environ.get("DRIPLE_DEVICE_REEXEC"):
            raise SystemExit("device_collect: driple was installed but is still not importable; "
                             f"run with PYTHONPATH={ROOT}")
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                               "--no-build-isolation", "-e", str(ROOT)])
        # An editable install takes effect in interpreters started after it (its .pth file is read
        # at start-up): this command starts again in one.
        os.environ["DRIPLE_DEVICE_REEXEC"] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])


def gpu_slug(spec: dict) -> str:
    """``h100``, ``h200``, …: the dataset folder a GPU's rows land in (``cpu`` without a GPU)."""
    gpus = spec.get("gpus") or []
    if not gpus:
        return "cpu"
    m = re.search(r"\b([A-Z]\d{2,3}[A-Z]?)\b", gpus[0]["name"].upper())
    return (m.group(1) if m else re.sub(r"[^a-z0-9]+", "-", gpus[0]["name"].lower())).lower()


def run(args) -> int:
    ensure_driple()
    from driple.collect.device_run import pack, run_chunk
    from driple.hardware.probe import probe

    setting = re.sub(r"^gpu-", "cpu-", args.setting) if args.dry_run else args.setting
    spec = probe().to_dict()
    slug = "cpu" if args.dry_run else gpu_slug(spec)
    landed = Path(args.datasets) / f"gpu-{slug}" / setting
    with tempfile.TemporaryDirectory(prefix="driple-chunk-") as work:
        counts = run_chunk(args.grid, setting, landed, work, args.minutes, max_seconds=args.max_seconds,
                           progress=False)
        files = pack(work, args.out, counts["new"], extra={
            "setting": setting, "gpu": slug, "spec": spec, "grid": str(args.grid),
            "counts": {k: v for k, v in counts.items() if k not in ("new", "remaining")},
            "remaining": counts["remaining"], "command": " ".join(sys.argv)})
    print(json.dumps({"setting": setting, "new_rows": len(counts["new"]), "remaining": len(counts["remaining"]),
                      "next": counts["remaining"][:1], "files": [f.name for f in files]}))
    return 0


def land_chunk(args) -> int:
    from driple.collect.device_run import land, read_chunk

    info = read_chunk(args.files)
    dest = Path(args.datasets) / f"gpu-{info['gpu']}" / info["setting"]
    result = land(args.files, dest)
    print(f"{dest}: {result['added']} rows added ({result['rows']} in the chunk); "
          f"{result['remaining']} grid points still to do")
    return 0


def write_grid(args) -> int:
    import yaml

    from driple.collect.device_run import stratified_grid

    doc = stratified_grid(args.source, args.setting)
    head = (f"# The GPU grid: the {len(doc['jobs'])} jobs of {args.source} (same architectures, batches and\n"
            "# optimizers), families taken in turn so that every prefix is family-stratified.\n"
            f"# python scripts/device_collect.py grid --source {args.source} --out {args.out}\n")
    Path(args.out).write_text(head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    print(f"{args.out}: {len(doc['jobs'])} jobs")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="measure the next chunk (on the lent machine)")
    r.add_argument("--setting", default="gpu-ddp-w1-lo")
    r.add_argument("--grid", default=str(GRID))
    r.add_argument("--datasets", default=str(ROOT / "datasets"), help="where landed chunks live")
    r.add_argument("--minutes", type=float, default=7.0, help="no job starts after this (default 7)")
    r.add_argument("--max-seconds", type=float, default=60.0, help="cap on one job's measured part")
    r.add_argument("--out", required=True, help="the folder that comes back ($OUT)")
    r.add_argument("--dry-run", action="store_true", help="measure the setting's CPU twin instead")
    r.set_defaults(func=run)
    la = sub.add_parser("land", help="append a chunk that came back to its dataset")
    la.add_argument("files", help="the folder holding chunk.json and its parts")
    la.add_argument("--datasets", default=str(ROOT / "datasets"))
    la.set_defaults(func=land_chunk)
    gr = sub.add_parser("grid", help="write the fixed GPU grid from a CPU grid")
    gr.add_argument("--source", default="datasets/v2/cpu-ddp-w2-lo/grid.yaml")
    gr.add_argument("--setting", default="gpu-ddp-w1-lo")
    gr.add_argument("--out", default=str(GRID))
    gr.set_defaults(func=write_grid)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("device_collect: interrupted; the rows measured so far are in the work folder only", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback, on the lent machine's log
        from driple.errors import DripleError

        if isinstance(exc, DripleError):
            print(f"device_collect: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
