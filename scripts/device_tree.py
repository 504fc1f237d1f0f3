"""Make the checkout small enough to travel to a lent machine, and whole again after.

The lent machine gets a copy of the working tree (tracked files and untracked ones git does
not ignore), 64 MiB at most; the datasets' raw series and timelines are most of the tree and a
device run needs none of them (a chunk resumes from the landed ``results.csv``). ``shrink``
takes ``datasets/**/raw/`` out of the working tree with git's sparse checkout: the files stay
tracked, in the index and in every commit (a commit made meanwhile does not delete them), only
their copies on disk go. ``restore`` brings them back. ``size`` prints what would travel.

    python scripts/device_tree.py shrink && python scripts/device_tree.py size
    ... device run ...
    python scripts/device_tree.py restore
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 64 * 1024 * 1024
KEEP_OUT = "!/datasets/**/raw/"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def travelling_bytes() -> tuple[int, int]:
    """``(bytes, files)`` of the tracked and untracked-not-ignored files present on disk."""
    names = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    total = count = 0
    for name in filter(None, names):
        path = ROOT / name
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            count += 1
    return total, count


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("shrink", "restore", "size"))
    args = ap.parse_args(argv)
    if args.action == "shrink":
        git("sparse-checkout", "set", "--no-cone", "/*", KEEP_OUT)
    elif args.action == "restore":
        git("sparse-checkout", "disable")
    total, count = travelling_bytes()
    verdict = "travels" if total <= LIMIT else "too large to travel"
    print(f"{total / 2 ** 20:.1f} MiB in {count} files would travel ({verdict}; limit {LIMIT >> 20} MiB)")
    return 0 if args.action != "size" or total <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
