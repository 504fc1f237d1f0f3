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
    ev = hsub.add_parser(
        "evaluate", help="measure how well predictions carry to the machines a dataset's rows name",
        description="Predict every quiet job of DATASET with the inspector of SETTING twice: as "
        "trained (for the machine its rows were measured on) and carried to the machine each row "
        "names (--hardware's scaling); per target, MAPE, median signed error and how often the "
        "carried 90 %% interval covers the measurement. Rows of another CPU model give the "
        "cross-machine error, the same jobs at two host speeds the drift error.")
    ev.add_argument("--setting", required=True, help="setting id of a shipped inspector, or a checkpoint path")
    ev.add_argument("--dataset", required=True, help="a collector dataset directory (results.csv)")
    ev.add_argument("--drift", metavar="DATASET2", default=None,
                    help="the same grid measured at another host speed: per job, the carried step "
                    "time at each speed and the predicted speed ratio against the measured one")
    ev.add_argument("--specs", choices=("row", "median"), default="row",
                    help="carry to each row's own probe (default), or to the median of the "
                    "dataset's probes (one probe varies ±10 %% from job to job on a VM)")
    ev.add_argument("--table-from", metavar="DATASET0", default=None,
                    help="also fit the best table model (gradient boosting on graph-level numbers) "
                    "on DATASET0's rows (the inspector's own machine) and score it beside, on DATASET")
    ev.add_argument("--json", action="store_true", help="print the figures as JSON")
    ev.set_defaults(func=run_evaluate)
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


def run_evaluate(args: argparse.Namespace) -> int:
    from driple.evaluation.hardware import drift_check, evaluate_carry

    if args.drift:
        result = drift_check(args.setting, args.dataset, args.drift, progress=not args.json, specs=args.specs)
        if args.json:
            json.dump(result, sys.stdout, indent=2)
            print()
            return 0
        print(f"{result['setting']}: {result['jobs']} jobs at two host speeds ({', '.join(result['datasets'])})")
        print(f"carried step time MAPE: {result['mape'][0]:.1f} % and {result['mape'][1]:.1f} %")
        print(f"speed ratio, predicted against measured: MAPE {result['ratio_mape']:.1f} %, median "
              f"{result['ratio_median_signed']:+.1f} %, {100 * result['ratio_within_5pct']:.0f} % of jobs within 5 %")
        return 0
    result = evaluate_carry(args.setting, args.dataset, progress=not args.json, specs=args.specs,
                            table_from=args.table_from)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    print(f"{result['setting']} (trained on {result['trained_on']}) on {result['jobs']} jobs of {result['dataset']}")
    print("rows measured on: " + ", ".join(f"{m['cpu_model']} ({m['rows']})" for m in result["machines"]))
    table = result.get("table_from")
    print(f"{'target':<26}{'as trained: MAPE':>18}{'signed':>9}{'carried: MAPE':>16}{'signed':>9}{'covered':>9}"
          + (f"{'hgb: MAPE':>12}{'signed':>9}" if table else ""))
    for t, row in result["targets"].items():
        a, b = row["trained"], row["carried"]
        cov = "-" if b.get("covered") is None else f"{100 * b['covered']:.0f} %"
        c = row.get("table")
        print(f"{t:<26}{a['mape']:>16.1f} %{a['median_signed']:>+8.1f}%{b['mape']:>14.1f} %"
              f"{b['median_signed']:>+8.1f}%{cov:>9}" + (f"{c['mape']:>10.1f} %{c['median_signed']:>+8.1f}%" if c else ""))
    if table:
        print(f"hgb: gradient boosting on graph-level numbers, fitted on the rows of {table}")
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
    if spec.blas_path:
        lines.append(f"BLAS code path: {spec.blas_path} (MKL picks it by CPU vendor; its kept buffers "
                     "move a worker's memory by up to 20 MB)")
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
