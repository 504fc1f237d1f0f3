"""Measure the buffers MKL keeps after matrix products on this host, against driple's formulas
(driple/hardware/blas.py): one thread, one product per shape, MKL's own count
(``mkl_serv_mem_stat``) after it.

    python scripts/measure_blas_buffers.py                 # this host's code path
    python scripts/measure_blas_buffers.py --intel-path    # MKL made to take its Intel path too
    LD_PRELOAD=$(python scripts/measure_blas_buffers.py --shim) driple collect sweep ...

MKL picks its code path by CPU vendor. On a non-Intel x86 host, a shim that answers MKL's
"is this an Intel CPU" check with yes (``--shim`` compiles it with the C compiler and prints its
path) makes MKL take the path it takes on an Intel CPU of the same instruction set: that is
how the Intel path's formula was measured on the AMD EPYC host, and how the memory of the
Intel Xeon rows was reproduced there (docs/memory.md). Exit status 1 when a product's buffer
is off the formula by more than --tolerance bytes.
"""
from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHIM_SOURCE = "int mkl_serv_intel_cpu_true(void) { return 1; }\nint mkl_serv_intel_cpu(void) { return 1; }\n"
SIZES = [1, 16, 40, 64, 192, 256, 384, 1000, 1024, 4096]


def shim(directory: Path) -> Path:
    """The shared library that makes MKL take its Intel path (compiled once into ``directory``)."""
    lib = directory / "libdriple_mkl_intel_path.so"
    if not lib.exists():
        src = directory / "mkl_intel_path.c"
        src.write_text(SHIM_SOURCE)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def measure(shapes) -> list:
    """``[(M, K, N, B transposed, bytes MKL holds)]`` after each product alone, one thread."""
    import torch

    from driple.hardware.probe import torch_cpu_library

    lib = torch_cpu_library()
    lib.mkl_serv_mem_stat.restype = ctypes.c_int64
    torch.set_num_threads(1)
    out = []
    for m, k, n, bt in shapes:
        a = torch.randn(m, k)
        b = torch.randn(n, k).t() if bt else torch.randn(k, n)
        lib.mkl_serv_free_buffers()
        a @ b
        out.append((m, k, n, bt, int(lib.mkl_serv_mem_stat(ctypes.byref(ctypes.c_int(0))))))
    return out


def compare(rows, path: str, tolerance: int) -> int:
    from driple.hardware.blas import buffer_bytes

    off = [(m, k, n, bt, held, buffer_bytes(path, m, k, n, bt)) for m, k, n, bt, held in rows]
    bad = [r for r in off if abs(r[4] - r[5]) > tolerance]
    print(f"{path}: {len(rows)} products, {len(rows) - len(bad)} within {tolerance} bytes of the formula")
    for m, k, n, bt, held, want in bad:
        print(f"  ({m}, {k}, {n}{', B transposed' if bt else ''}): MKL holds {held / 1e6:.3f} MB, formula {want / 1e6:.3f} MB")
    return len(bad)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--intel-path", action="store_true", help="also measure MKL's Intel path (through the shim)")
    ap.add_argument("--shim", action="store_true", help="compile the shim and print its path, nothing else")
    ap.add_argument("--tolerance", type=int, default=5000, help="bytes a buffer may be off (default 5000)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the measurement itself, for a child
    args = ap.parse_args(argv)
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "driple"
    if args.shim:
        home.mkdir(parents=True, exist_ok=True)
        print(shim(home))
        return 0
    shapes = [(m, k, n, bt) for m, k, n in itertools.product(SIZES, repeat=3) for bt in (False, True)
              if m * k * n <= 1 << 31 ]
    from driple.hardware.probe import blas_code_path

    if args.json:
        print(json.dumps({"path": blas_code_path(), "rows": measure(shapes)}))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        envs = [{}] + ([{"LD_PRELOAD": str(shim(Path(tmp)))}] if args.intel_path else [])
        return int(sum(_run(env, args.tolerance) for env in envs) > 0)


def _run(env: dict, tolerance: int) -> int:
    """Measure in a child (its MKL path set by ``env``) and compare with that path's formula."""
    from driple.hardware.blas import PATHS

    done = subprocess.run([sys.executable, __file__, "--json"], env={**os.environ, **env},
                          capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    if found["path"] not in PATHS:
        print(f"BLAS path {found['path'] or 'not MKL'}: no formula to compare with", file=sys.stderr)
        return 1
    return compare([tuple(r) for r in found["rows"]], found["path"], tolerance)


if __name__ == "__main__":
    sys.exit(main())
