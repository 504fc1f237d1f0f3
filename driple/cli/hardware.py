"""``driple hardware``: what this machine is, as the spec every row and prediction names."""
from __future__ import annotations

import argparse
import json
import sys

from driple.errors import DripleError


def register(sub: argparse._SubParsersAction) -> None:
    hw = sub.add_parser(
        "hardware", help="probe this machine into a hardware spec",
        description="A hardware spec says what a machine is, as driple uses it: float32/float64/"
        "bfloat16 matmul FLOP/s at the worker's thread count, copy bandwidth, the cores a job can "
        "use (affinity and cgroup quota), caches, memory, link rates and GPUs. The collector "
        "records one in every row; `driple predict --hardware SPEC.json` predicts for it.")
    hsub = hw.add_subparsers(dest="hardware_command", metavar="SUBCOMMAND")
    pr = hsub.add_parser("probe", help="measure this machine (a few seconds)",
                         description="Measure this machine into a hardware spec (a few seconds; "
                         "measure on a quiet host: a busy one reads slow).",
                         epilog="example:\n  driple hardware probe --json > this-host.json\n"
                                "  driple predict resnet50 --hardware this-host.json",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_argument("--threads", type=int, default=1,
                    help="torch threads of one worker (default 1, as the collector runs workers)")
    pr.add_argument("--repeats", type=int, default=5, help="timed runs per figure, best kept (default 5)")
    pr.add_argument("--json", action="store_true", help="print the spec as JSON (a file --hardware reads)")
    pr.set_defaults(func=run_probe)
    sh = hsub.add_parser("show", help="print a spec file in words")
    sh.add_argument("spec", help="a spec file (driple hardware probe --json)")
    sh.set_defaults(func=run_show)
    hw.set_defaults(func=lambda args: (hw.print_help(), 0)[1])


def run_probe(args: argparse.Namespace) -> int:
    from driple.hardware.probe import probe

    if args.threads < 1 or args.repeats < 1:
        raise DripleError("--threads and --repeats must be at least 1")
    spec = probe(threads=args.threads, repeats=args.repeats)
    if args.json:
        json.dump(spec.to_dict(), sys.stdout, indent=2, sort_keys=True)
        print()
    else:
        print(describe(spec))
    return 0


def run_show(args: argparse.Namespace) -> int:
    from driple.hardware.spec import load_spec

    print(describe(load_spec(args.spec)))
    return 0


def describe(spec) -> str:
    """A spec in lines of words and units."""
    lines = [spec.summary()]
    rates = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in sorted(spec.matmul_flops_per_s.items()))
    lines.append(f"matmul GFLOP/s on {spec.threads_per_worker} thread(s): {rates}")
    lines.append(f"copy: {spec.copy_bytes_per_s / 1e9:.2f} GB/s (read + written)")
    if spec.logical_cpus:
        lines.append(f"CPUs: {spec.logical_cpus} logical, {spec.cores_available:g} usable (affinity, cgroup quota)")
    if spec.caches_bytes:
        lines.append("caches: " + ", ".join(f"{k} {_size(v)}" for k, v in sorted(spec.caches_bytes.items())))
    if spec.memory_bytes:
        lines.append(f"memory: {spec.memory_bytes / 2 ** 30:.1f} GiB")
    lines.append("links: " + (", ".join(f"{k} {v / 1e9:g} Gbit/s" for k, v in sorted(spec.links_bits_per_s.items()))
                              or "none with a known rate (loopback and veth have none)"))
    for g in spec.gpus:
        peaks = ", ".join(f"{k} {v / 1e12:.0f}" for k, v in sorted(g.peak_flops_per_s.items()))
        lines.append(f"GPU {g.index}: {g.name}, {g.sms} SMs, {g.memory_bytes / 2 ** 30:.0f} GiB, "
                     f"{g.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s" + (f", peak TFLOP/s {peaks}" if peaks else ""))
    lines.append(f"how: {spec.how}")
    return "\n".join(lines)


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
