"""Rewrite a dataset's stored timelines in the current (compact, lossless) encoding.

    python scripts/compact_timelines.py datasets/v2/cpu-ddp-w2-lo [more datasets ...]

Timelines written by an older collector keep their arrays as they are; the current
:func:`driple.collect.timeline.record.save_job_timelines` stores the allocated-bytes samples
as byte-shuffled deltas (about half the size). The arrays read back identical, so every label
recomputes bit for bit (check with ``driple collect relabel DATASET``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from driple.collect.timeline.record import load_job_timelines, save_job_timelines


def compact(dataset: Path) -> tuple[int, int, int]:
    """``(files, bytes before, bytes after)``; each file is checked to read back identical."""
    files = before = after = 0
    for path in sorted((dataset / "raw").glob("*.timeline.npz")):
        old = load_job_timelines(path)
        size = path.stat().st_size
        save_job_timelines(path, old)
        new = load_job_timelines(path)
        for name, tl in old.items():
            for key, arr in tl.arrays().items():
                if not np.array_equal(getattr(new[name], key), arr):
                    raise SystemExit(f"{path}: {name}/{key} differs after rewriting")
        files, before, after = files + 1, before + size, after + path.stat().st_size
    return files, before, after


def main(argv=None) -> int:
    for d in (argv if argv is not None else sys.argv[1:]):
        n, a, b = compact(Path(d))
        print(f"{d}: {n} timelines, {a / 1e6:.1f} MB -> {b / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
