"""``driple gpu-memory``: whether a job fits on a GPU, and the largest batch that does."""
from __future__ import annotations

import argparse
import json
import sys

from driple.errors import DripleError

_EXAMPLE = """examples:
  driple gpu-memory resnet50 --batch-size 256 --gpu h200.json
  driple gpu-memory gpt2_large --optimizer adam --gpu this --json
  driple gpu-memory mymodels.py:build --strategy fsdp --workers 8 --gpu h100.json

A spec file comes from `driple hardware probe --json > h100.json` run on the GPU machine."""


def register(sub: argparse._SubParsersAction) -> None:
    from driple.cli.predict import add_job_arguments

    gm = sub.add_parser(
        "gpu-memory", help="whether a job fits on a GPU, and the largest batch that does",
        description="One CUDA worker's memory from the traced step, nothing trained: the step's "
        "tensors at their peak (parameters, gradients, optimizer state, activations, the strategy's "
        "buffers, the batch) plus PyTorch's cuBLAS workspaces, against the GPU's memory; then the "
        "largest batch per worker whose peak fits. The error it was measured with on real GPU jobs "
        "is printed beside it. Not counted: the CUDA context and the allocator's fragmentation.",
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(gm)
    gm.add_argument("--gpu", required=True, metavar="this|SPEC.json",
                    help="the GPU: 'this' (probe this machine's) or a hardware spec file with a GPU")
    gm.add_argument("--gpu-index", type=int, default=0, help="which GPU of the spec (default 0)")
    gm.add_argument("--strategy", default="ddp", help="ddp (default), fsdp or ps: what one worker holds")
    gm.add_argument("--workers", type=int, default=1, help="workers of the job (FSDP shards over them; default 1)")
    gm.add_argument("--no-search", action="store_true", help="skip the largest-batch search (a few traces)")
    gm.add_argument("--json", action="store_true", help="print the report as JSON")
    gm.set_defaults(func=run_gpu_memory)


def load_gpu(what: str, index: int = 0):
    """The :class:`~driple.hardware.spec.GpuSpec` that ``--gpu`` names."""
    from driple.predict.gpu_memory import pick_gpu

    if not str(what).strip():
        raise DripleError("--gpu needs 'this' or a spec file")
    if what == "this":
        from driple.hardware.probe import probe_gpus

        gpus = probe_gpus()
        if not gpus:
            raise DripleError("this machine has no GPU that torch sees; pass a spec probed on the GPU "
                              "machine (`driple hardware probe --json > gpu.json`, then --gpu gpu.json)")
    else:
        from driple.hardware.spec import load_spec

        gpus = load_spec(what).gpus
    return pick_gpu(gpus, index)


def run_gpu_memory(args: argparse.Namespace) -> int:
    from driple.collect.job import parse_knobs
    from driple.predict.gpu_memory import gpu_report

    gpu = load_gpu(args.gpu, args.gpu_index)
    report = gpu_report(args.model, gpu, batch_size=args.batch_size, optimizer=args.optimizer,
                        knobs=parse_knobs(args.knobs), strategy=args.strategy, workers=args.workers,
                        largest=not args.no_search)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(describe(report))
    return 0


def describe(r: dict) -> str:
    """The report in words."""
    head = (f"{r['model']} (batch {r['batch_size']}, {r['optimizer']}), one {r['strategy']} worker of "
            f"{r['workers']} on {r['gpu']} ({r['capacity_mb'] / 1e3:.1f} GB)")
    verdict = ("fits" if r["fits"] else f"DOES NOT FIT: {r['exceeds_by_mb'] / 1e3:.2f} GB over")
    lines = [head, f"  peak {r['peak_mb']:.0f} MB ({r['phase']}): {verdict}",
             f"  between steps {r['between_steps_mb']:.0f} MB"]
    for part, mb in r["breakdown_mb"].items():
        if mb >= 0.05:
            lines.append(f"    {part.replace('_', ' '):18s} {mb:10.1f} MB")
    big = r.get("largest_batch")
    if big:
        if big.get("unbounded"):
            lines.append(f"  memory does not limit the batch (batch {big['batch']} fits)")
        elif big["batch"] == 0:
            lines.append("  not even batch 1 fits")
        else:
            lines.append(f"  largest batch per worker that fits: {big['batch']} (peak {big['peak_mb']:.0f} MB)")
    err = r.get("measured_error")
    if err:
        lines.append(f"  measured: peak within {err['peak_mape_pct']} % MAPE on {err['jobs']} jobs "
                     f"({', '.join(err['gpus'])}, {', '.join(err['datasets'])})")
    lines.append(f"  not counted: {r['not_counted']}")
    lines.append(f"  caveat: {r['caveat']}")
    return "\n".join(lines)
