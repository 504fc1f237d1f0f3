"""The memory simulator on the GPU datasets, nothing fitted to them (driple.evaluation.gpu_memory):
the peak and the between-steps level of every measured GPU job against its labels.

    python scripts/eval_gpu_memory.py                 # print
    python scripts/eval_gpu_memory.py --write         # also trained_models/evaluation/gpu/memory.json
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="*", help="GPU dataset folders (default: datasets/gpu-*/*/)")
    ap.add_argument("--write", action="store_true", help="write the figures file")
    ap.add_argument("--out", default=str(ROOT / "trained_models" / "evaluation" / "gpu" / "memory.json"))
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    from driple.collect.provenance import script_stamp
    from driple.errors import DripleError
    from driple.evaluation.gpu_memory import evaluate
    from driple.inspector.dataset import read_results

    folders = args.datasets or sorted(str(Path(p).parent) for p in glob.glob(str(ROOT / "datasets/gpu-*/*/results.csv")))
    if not folders:
        print("eval_gpu_memory: no GPU dataset (datasets/gpu-*/*/results.csv)", file=sys.stderr)
        return 2
    figures = {}
    try:
        for folder in folders:
            figures[Path(folder).parent.name + "/" + Path(folder).name] = evaluate(read_results(str(Path(folder) / "results.csv")), progress=True)
    except DripleError as err:
        print(f"eval_gpu_memory: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        for name, f in figures.items():
            print(f"{name}: {f['jobs']} jobs on {', '.join(f['gpus'])}")
            for key in ("peak", "peak_at_sample_points", "low"):
                e = f[key]
                print(f"  {key:22s} MAPE {e['mape']:5.1f} %  median {e['median_ape']:5.1f} %  "
                      f"signed median {e['signed_median']:+5.1f} %  max {e['max_ape']:5.1f} %")
    if args.write:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"provenance": script_stamp("eval_gpu_memory.py", argv), **figures},
                                  indent=1) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
