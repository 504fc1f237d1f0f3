"""``driple collect``: run real distributed jobs, sweep a grid, plot a job's burst/idle split."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from driple.collect.results import CONTENDED_PCT
from driple.errors import DripleError
from driple.shipped import refuse_shipped
from driple.zoo.optim import OPTIMIZERS
from driple.zoo.workload import PROTOCOL

_RUN_HELP = """\
Launch MODEL for real as a distributed training job in SETTING (e.g. cpu-ddp-w2-lo: 2 DDP
workers on loopback; cpu-ps-p1w2-1g: 1 parameter server + 2 workers, each on an emulated host
with 1 Gbit/s links, root only), sample every worker while it trains on synthetic data, and
print the 12 burst/idle metrics (mean over workers) after warm-up. The row is appended to
OUT/results.csv and the raw series kept in OUT/raw/<job_id>.npz (see `driple collect plot`).

MODEL is a zoo name (`driple zoo`) or your own code as module:function or file.py:function
(below). Each rank builds it with the same seed, draws its batch with make_batch(batch_size,
generator seeded with seed + rank, device) and runs loss_fn(forward(model, inputs), targets).
"""

_SWEEP_HELP = """\
Run every job of a grid (see `driple collect grid`) in SETTING, one after another, into the
dataset directory OUT: results.csv (one row per job), raw/ (series and per-worker labels),
provenance.json (machine, versions, command lines) and a copy of the grid.

Stop it at any moment with Ctrl-C: finished rows are kept, the running job is recorded as
failed ("interrupted ...") and its processes and namespaces are removed. Run the same command
again to continue: finished jobs (ok, or failed by a crash/timeout) are skipped, interrupted
ones are run again (--retry-failed also re-runs crashed and hung ones).

On a Slurm cluster, --executor slurm submits every pending point as an exclusive Slurm job
(submitit) and gathers the rows as the jobs finish; OUT must be on a filesystem the nodes share.
Stopping the driver leaves the jobs running; the same command attaches to them again and never
runs a finished point twice. A job cancelled or lost becomes a failed row with Slurm's reason.
"""


_CORUN_HELP = """\
Run two or more jobs at the same time on this host, each exactly as `driple collect run` would
(own ranks, own sampler; on loopback each gets its own rendezvous port), to measure how they
load the host together. Into OUT it writes each job's row in results.csv (job_id
<corun_id>-<k>-<sweep id>, plus corun_id and base_job_id) with its raw series in raw/, and one
row per co-run in coruns.csv: the jobs, the overlap window (s since the co-run's start, when
every job was past its warm-up) and per resource the combined mean load -- each job's mean over
its workers over the overlap window, summed over the jobs (compute in % of one core, memory in
% of host memory, tx/rx in MB/s). The jobs start together but leave their warm-up seconds apart
on a busy host, so the overlap is shorter than --seconds: measure a few seconds longer.

JOB is MODEL[,knob=value...] with the special knobs bs= (batch size) and opt= (optimizer), as
for `driple colocate`. With --grid, a YAML file lists several co-runs; co-runs already ok in
OUT are skipped, so a stopped grid resumes:

  seconds: 6
  coruns:
    - ["resnet,depth=20,bs=32", "mlp,bs=256"]
    - [{model: resnet, knobs: {depth: 20}, batch_size: 32}, {model: gpt_tiny, batch_size: 16}]

A job that fails stops the others; Ctrl-C stops all of them. Either way every process is
cleaned up and the co-run is recorded as failed. In an emulated setting each job gets its own
emulated cluster (the jobs share the host, not a link).

examples:
  driple collect corun resnet,depth=20,bs=32 mlp,bs=256 --seconds 6 --out my-coruns
  driple collect corun --grid pairs.yaml --out my-coruns
"""


def _overwrite_arg(p: argparse.ArgumentParser) -> None:
    from driple.shipped import OVERWRITE_FLAG

    p.add_argument(OVERWRITE_FLAG, action="store_true",
                   help="allow --out inside the shipped datasets (datasets/ of a driple checkout) "
                   "or inspectors; refused otherwise")


def register(sub: argparse._SubParsersAction) -> None:
    collect = sub.add_parser(
        "collect", help="run real distributed jobs and measure burst/idle of each resource",
        description="The collector: run real distributed PyTorch training jobs (DDP all-reduce or "
        "parameter server), sample compute, memory and network of every worker, and label the "
        "burst and idle phases. `run` measures one job, `grid` writes a list of jobs, `sweep` "
        "runs a list into a dataset (resumable), `corun` runs jobs at the same time, `plot` draws a job's series with its burst/idle "
        "split, `cleanup` removes emulated-network leftovers of a crashed run.",
    )
    collect.set_defaults(func=lambda args: (collect.print_help(), 0)[1])
    cs = collect.add_subparsers(dest="collect_command", metavar="SUBCOMMAND")

    run = cs.add_parser("run", help="launch one job for real and print its labels (12 burst/idle metrics and the step time)",
                        description=_RUN_HELP, epilog=PROTOCOL,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("model", metavar="MODEL", help="zoo model name, or module:function / file.py:function")
    run.add_argument("--setting", default="cpu-ddp-w2-lo",
                     help="where the job runs, e.g. cpu-ddp-w2-lo, cpu-ps-p1w2-lo, cpu-ddp-w2-1g (default cpu-ddp-w2-lo)")
    run.add_argument("--batch-size", type=int, default=None, help="samples per worker per iteration (default: the model's)")
    run.add_argument("--seconds", type=float, default=10.0, help="measurement length after warm-up, s (default 10)")
    run.add_argument("--optimizer", default="sgd", help=f"{', '.join(OPTIMIZERS)} (default sgd)")
    run.add_argument("--lr", type=float, default=None, help="learning rate (default: the optimizer's)")
    run.add_argument("--set", dest="knobs", action="append", metavar="KNOB=VALUE",
                     help="model knob, e.g. --set depth=32 (repeatable)")
    run.add_argument("--warmup", type=int, default=5, help="warm-up iterations excluded from measurement (default 5)")
    run.add_argument("--iterations", type=int, default=None,
                     help="measure exactly this many iterations per worker instead of --seconds")
    run.add_argument("--seed", type=int, default=0, help="seed of weights and synthetic data (default 0)")
    run.add_argument("--min-iterations", type=int, default=20,
                     help="measure at least this many iterations per worker (default 20): labels are medians over them")
    run.add_argument("--max-seconds", type=float, default=120.0,
                     help="cap on the measured part, s (default 120); a job that needs longer for its "
                     "minimum iterations fails with that reason")
    run.add_argument("--timeline", choices=["marks", "profiler"], default="marks",
                     help="how ranks record their timeline on CPU hosts: phase marks (default, ~0 cost) or "
                     "torch.profiler (records every op; for comparison). GPUs always use the profiler")
    run.add_argument("--allow-other-hardware", action="store_true",
                     help="add the row even if --out holds rows measured on another CPU/GPU model")
    run.add_argument("--timeout", type=float, default=None,
                     help="kill the job and record it failed after this many s (default 90 + 2 x max(seconds, max-seconds))")
    run.add_argument("--launcher", choices=["env", "torchrun"], default="env",
                     help="start ranks directly with the torch env contract (default) or via torchrun (loopback only)")
    run.add_argument("--nodes", type=int, default=None, metavar="N",
                     help="run as a multi-node job: N emulated nodes (network namespaces with the "
                     "setting's links), one torchrun agent each, joined through c10d rendezvous")
    run.add_argument("--period", type=float, default=0.01, help="sampling period, s (default 0.01)")
    run.add_argument("--out", default=None, help="dataset directory for the row and raw series (default runs/<setting>)")
    run.add_argument("--json", action="store_true", help="print the row as JSON")
    _overwrite_arg(run)
    run.set_defaults(func=cmd_run)

    sweep = cs.add_parser("sweep", help="run a grid of jobs into a dataset, resumable",
                          description=_SWEEP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sweep.add_argument("--setting", default=None, help="setting id (default: the grid's 'setting:')")
    sweep.add_argument("--grid", required=True, help="grid YAML (from `driple collect grid`)")
    sweep.add_argument("--out", required=True, help="dataset directory, e.g. my-datasets/cpu-ddp-w2-lo/ (the "
                       "shipped datasets/ are refused without --overwrite-shipped)")
    sweep.add_argument("--seconds", type=float, default=None, help="measurement per job, s (default: the grid's, else 10)")
    sweep.add_argument("--timeout", type=float, default=None,
                       help="per-job timeout, s (default 90 + 2 x max(seconds, max-seconds))")
    sweep.add_argument("--max-seconds", type=float, default=None,
                       help="cap on each job's measured part, s (default: the grid's, else 120)")
    sweep.add_argument("--min-iterations", type=int, default=None,
                       help="measured iterations per worker at least (default: the grid's, else 20)")
    sweep.add_argument("--allow-other-hardware", action="store_true",
                       help="add rows even if --out holds rows measured on another CPU/GPU model")
    sweep.add_argument("--retry-failed", action="store_true", help="also re-run jobs that crashed or hung before")
    sweep.add_argument("--retry-contended", type=float, metavar="PCT",
                       help="also re-run ok jobs measured while other processes used more than PCT %% "
                            "of the host CPU (column host_other_cpu_pct)")
    sweep.add_argument("--host-lock", metavar="FILE", default=None,
                       help="hold an exclusive flock on FILE while each job is measured; other work "
                       "run as `flock FILE command` then never overlaps a measurement")
    sweep.add_argument("--retry-delayed", type=float, metavar="PCT",
                       help="also re-run ok jobs whose ranks waited for a CPU more than PCT %% of the "
                       "measured time (column run_delay_pct): the direct sign that the job was slowed")
    sweep.add_argument("--wait-quiet", type=float, default=None, metavar="PCT",
                       help="before each job, wait until the host is at most PCT %% busy over 3 s "
                       "(other work on a shared machine would distort the measurement)")
    sweep.add_argument("--max-jobs", type=int, default=None, metavar="N",
                       help="run at most N of the pending jobs (grid order), leave the rest for later")
    sweep.add_argument("--launcher", choices=["env", "torchrun"], default="env", help="how ranks are started (default env)")
    sweep.add_argument("--nodes", type=int, default=None, metavar="N",
                       help="measure every job as a multi-node job of N emulated nodes (see `collect run --nodes`)")
    sweep.add_argument("--executor", choices=["local", "slurm"], default="local",
                       help="local: one job after another on this host (default); slurm: every point "
                       "an exclusive Slurm job through submitit")
    sweep.add_argument("--slurm-partition", default=None, help="Slurm partition (default: the cluster's)")
    sweep.add_argument("--slurm-time-min", type=int, default=None,
                       help="Slurm time limit per point, minutes (default: the job timeout + 5)")
    sweep.add_argument("--poll-seconds", type=float, default=5.0,
                       help="how often the slurm driver asks for finished jobs (default 5)")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bar")
    _overwrite_arg(sweep)
    sweep.set_defaults(func=cmd_sweep)

    grid = cs.add_parser("grid", help="write a grid of jobs from the zoo's sweep configurations",
                         description="Write a grid YAML of jobs (model, knobs, batch size, optimizer) drawn by "
                         "driple.zoo.sweep_configs(seed); edit it freely, then `driple collect sweep --grid`.")
    grid.add_argument("--out", required=True, help="grid file to write, e.g. grid.yaml")
    grid.add_argument("--n", type=int, default=None, help="keep the first N jobs (default all)")
    grid.add_argument("--seed", type=int, default=0, help="seed of the configuration draw (default 0)")
    grid.add_argument("--seconds", type=float, default=None, help="measurement per job to store in the grid, s")
    grid.add_argument("--warmup", type=int, default=None, help="warm-up iterations to store in the grid")
    _overwrite_arg(grid)
    grid.set_defaults(func=cmd_grid)

    plot = cs.add_parser("plot", help="draw a job's 4 time series with its burst/idle shading",
                         description="Draw compute, memory, TX and RX of a job's workers over time, burst "
                         "samples shaded, the measurement window marked, so you can check the split. RUN is "
                         "a job's raw file (raw/<id>.npz or .json), a dataset directory (its last job) or a "
                         "job id looked up in --dataset.")
    plot.add_argument("run", metavar="RUN_DIR_OR_ID", help="raw/<job_id>.npz|.json, a dataset dir, or a job id")
    plot.add_argument("--out", required=True, help="image to write (.png, .pdf, .svg)")
    plot.add_argument("--dataset", default=".", help="dataset directory where a job id is looked up (default .)")
    plot.add_argument("--target", action="append", default=None,
                      help="rank to draw, e.g. worker0 or server0 (repeatable; default all workers)")
    plot.add_argument("--span", type=float, default=1.0,
                      help="seconds shown, from the middle of the measurement window (default 1; 0 = whole run)")
    plot.add_argument("--start", type=float, default=None, help="first second shown (time since sampling started)")
    plot.set_defaults(func=cmd_plot)

    corun = cs.add_parser("corun", help="run 2+ jobs at the same time and measure their combined load",
                          description=_CORUN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    corun.add_argument("jobs", nargs="*", metavar="JOB", help="MODEL[,knob=value...], at least two (or --grid)")
    corun.add_argument("--grid", default=None, help="YAML file of co-runs (lists of jobs) instead of JOBs")
    corun.add_argument("--setting", default=None, help="setting id (default: the grid's, else cpu-ddp-w2-lo)")
    corun.add_argument("--seconds", type=float, default=None,
                       help="measurement of each job after warm-up, s (default: the grid's, else 10)")
    corun.add_argument("--warmup", type=int, default=None, help="warm-up iterations of every job (default: the grid's, else 5)")
    corun.add_argument("--out", default=None, help="dataset directory (default runs/corun-<setting>)")
    corun.add_argument("--host-lock", metavar="FILE", default=None,
                       help="hold an exclusive flock on FILE while each co-run is measured (see sweep --host-lock)")
    corun.add_argument("--timeout", type=float, default=None, help="per-job timeout, s (default 90 + 2 x seconds)")
    corun.add_argument("--period", type=float, default=0.01, help="sampling period, s (default 0.01)")
    corun.add_argument("--min-overlap", type=float, default=None, metavar="S",
                       help="a co-run whose jobs were measured together for less than S s is failed (default 1)")
    corun.add_argument("--json", action="store_true", help="print each co-run row as JSON")
    _overwrite_arg(corun)
    corun.set_defaults(func=cmd_corun)

    clean = cs.add_parser("cleanup", help="remove network namespaces/links left by a crashed run (root)",
                          description="Delete driple- network namespaces, veth links and bridges whose collector "
                          "process is gone. With --all, also those of running collectors.")
    clean.add_argument("--all", action="store_true", help="remove every driple- namespace and link")
    clean.set_defaults(func=cmd_cleanup)

    relabel = cs.add_parser(
        "relabel", help="recompute a dataset's labels from its raw files and compare",
        description="Recompute the labels of every ok job of DATASET from raw/<job>.timeline.npz "
        "(the ranks' timelines) and raw/<job>.npz (the sampled counters), with the labeller as "
        "shipped, and compare them with results.csv. Exit status 1 if any value differs.")
    relabel.add_argument("dataset", help="dataset directory, e.g. datasets/v2/cpu-ddp-w2-lo")
    relabel.add_argument("--labeller", choices=["timeline", "kmeans"], default="timeline",
                         help="which labels to recompute: the timeline labels (v2, the metric columns; "
                         "default) or the paper's k-means labels (kmeans_* columns)")
    relabel.add_argument("--write", action="store_true",
                         help="write the recomputed labels (both labellers) into results.csv and raw/<job>.json "
                         "instead of comparing: how a changed label definition reaches a dataset")
    relabel.add_argument("--json", action="store_true", help="print the report as JSON")
    relabel.add_argument("--no-progress", action="store_true", help="no progress bar")
    relabel.set_defaults(func=cmd_relabel)


def cmd_run(args: argparse.Namespace) -> int:
    from driple.collect.job import JobInterrupted, JobSpec, parse_knobs
    from driple.collect.launcher import run_job
    from driple.collect.provenance import record
    from driple.collect.results import ResultTable
    from driple.settings import parse_setting

    setting = parse_setting(args.setting)
    if args.nodes is not None:  # refused before anything is printed or started
        from driple.collect.multinode import check_nodes

        check_nodes(setting, args.nodes, args.launcher)
    spec = JobSpec(model=args.model, batch_size=args.batch_size, optimizer=args.optimizer, lr=args.lr,
                   knobs=parse_knobs(args.knobs), seed=args.seed, warmup=args.warmup,
                   iterations=args.iterations)
    from driple.zoo.workload import check_models

    check_models([spec.model])
    out = Path(args.out) if args.out else Path("runs") / setting.id
    refuse_shipped(out, args.overwrite_shipped)
    table = ResultTable(out)
    table.check_hardware(allow=args.allow_other_hardware)
    record(out, setting=setting.id)
    if not args.json:
        print(f"running {spec.model} in {setting.id}: {spec.warmup} warm-up iterations, then at least "
              f"{args.min_iterations} iterations and {args.seconds:g} s ...",
              file=sys.stderr)
    try:
        result = run_job(spec, setting, seconds=args.seconds, out_dir=out, timeout=args.timeout,
                         launcher=args.launcher, period_s=args.period, record=False,
                         min_iterations=args.min_iterations, max_seconds=args.max_seconds,
                         timeline=args.timeline, nodes=args.nodes)
    except JobInterrupted as stop:
        table.append(stop.result.row)
        raise KeyboardInterrupt from None
    table.append(result.row)
    if args.json:
        print(json.dumps({**result.row, "raw_path": str(result.raw_path) if result.raw_path else None,
                          "detail_path": str(result.detail_path)}, default=str))
    else:
        print(format_row(result.row, out))
    return 0 if result.ok else 1


def format_row(row: dict, out: Path) -> str:
    """The declared targets with units (12 burst/idle metrics and the step time), then the job's
    figures, as a small aligned table."""
    from driple.metrics import target_names, unit

    other = row.get("host_other_cpu_pct")
    contended = isinstance(other, (int, float)) and other > CONTENDED_PCT  # NaN: not measured
    lines = [f"job {row['job_id']}  setting {row['setting']}  status {row['status']}"
             + (" (contended)" if contended and row["status"] == "ok" else "")]
    if row["status"] != "ok":
        lines.append(f"  reason: {row['reason']}")
    else:
        lines.append(f"  {'metric':<24}{'value':>12}  unit")
        for m in target_names():
            lines.append(f"  {m:<24}{row[m]:>12.4g}  {unit(m)}")
        extra = [
            ("iteration time", row["iter_time_mean_s"] * 1e3, f"ms (std {row['iter_time_std_s'] * 1e3:.2f})"),
            ("iterations measured", row["iterations"], "per worker"),
            ("throughput", row["samples_per_s"], "samples/s (all workers)"),
            ("sent per iteration", row["tx_bytes_per_iter"] / 1e6, "MB per worker"),
            ("received per iteration", row["rx_bytes_per_iter"] / 1e6, "MB per worker"),
            ("model parameters", (row["param_bytes"] or 0) / 1e6, "MB"),
        ]
        for name, value, u in extra:
            lines.append(f"  {name:<24}{value:>12.4g}  {u}")
        if isinstance(other, (int, float)) and other == other:
            lines.append(f"  {'other processes':<24}{other:>12.4g}  % of host CPU while it ran")
            if contended:
                lines.append(f"  contended: other processes used more than {CONTENDED_PCT:g} % of the "
                             "host; training leaves this row out (a sweep re-runs it with --retry-contended)")
    lines.append(f"  wall time {row['duration_s']:.1f} s; raw series: {out / row['raw_path'] if row['raw_path'] else 'none'}")
    return "\n".join(lines)


def cmd_sweep(args: argparse.Namespace) -> int:
    from driple.collect.sweep import run_sweep

    refuse_shipped(args.out, args.overwrite_shipped)
    if args.executor == "slurm":
        return _slurm_sweep(args)
    try:
        counts = run_sweep(args.grid, args.out, args.setting, seconds=args.seconds, timeout=args.timeout,
                           retry_failed=args.retry_failed,
                           retry_contended=args.retry_contended, retry_delayed=args.retry_delayed,
                           progress=not args.no_progress,
                           launcher=args.launcher, max_jobs=args.max_jobs,
                           wait_quiet=args.wait_quiet, max_seconds=args.max_seconds,
                           min_iterations=args.min_iterations,
                           allow_other_hardware=args.allow_other_hardware,
                           host_lock=args.host_lock, nodes=args.nodes)
    except KeyboardInterrupt:
        print(f"driple: sweep stopped; finished rows are in {Path(args.out) / 'results.csv'}. "
              "Run the same command again to continue.", file=sys.stderr)
        return 130
    print(f"{counts['total']} jobs: {counts['skipped']} done before, {counts['ok']} ok, "
          f"{counts['failed']} failed -> {Path(args.out) / 'results.csv'}")
    left = counts["total"] - counts["skipped"] - counts["ok"] - counts["failed"]
    if left:
        print(f"{left} job{'s' if left != 1 else ''} left for a later run (--max-jobs {args.max_jobs})")
    return 0


def _slurm_sweep(args: argparse.Namespace) -> int:
    from driple.collect.slurm import run_slurm_sweep

    local_only = [f"--{n.replace('_', '-')}" for n in ("wait_quiet", "host_lock", "nodes") if getattr(args, n) is not None]
    if local_only:
        raise DripleError(f"{', '.join(local_only)} {'apply' if len(local_only) > 1 else 'applies'} to "
                          "--executor local only (a Slurm point runs on one node, which it has to itself)")
    try:
        counts = run_slurm_sweep(args.grid, args.out, args.setting, partition=args.slurm_partition,
                                 time_min=args.slurm_time_min, poll_s=args.poll_seconds,
                                 progress=not args.no_progress, launcher=args.launcher, timeout=args.timeout,
                                 seconds=args.seconds, max_seconds=args.max_seconds,
                                 min_iterations=args.min_iterations, retry_failed=args.retry_failed,
                                 retry_contended=args.retry_contended, retry_delayed=args.retry_delayed,
                                 max_jobs=args.max_jobs, allow_other_hardware=args.allow_other_hardware)
    except KeyboardInterrupt:
        print(f"driple: stopped gathering; the Slurm jobs go on. Run the same command again to gather "
              f"them into {Path(args.out) / 'results.csv'}.", file=sys.stderr)
        return 130
    print(f"{counts['total']} jobs: {counts['skipped']} done before, {counts['submitted']} submitted now, "
          f"{counts['attached']} submitted before; {counts['ok']} ok, {counts['failed']} failed -> "
          f"{Path(args.out) / 'results.csv'}")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    from driple.collect.sweep import load_grid, write_grid

    refuse_shipped(args.out, args.overwrite_shipped)
    path = write_grid(args.out, n=args.n, seed=args.seed, seconds=args.seconds, warmup=args.warmup)
    print(f"wrote {len(load_grid(path)['jobs'])} jobs to {path}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from driple.collect.plot import plot_job

    path = plot_job(args.run, args.out, dataset=args.dataset, targets=args.target, span=args.span, start=args.start)
    print(f"wrote {path}")
    return 0


def cmd_relabel(args: argparse.Namespace) -> int:
    from driple.collect.labels.relabel import check_dataset

    if not (Path(args.dataset) / "results.csv").exists():
        raise DripleError(f"{args.dataset} holds no results.csv; pass a dataset directory")
    if args.write:
        from driple.collect.labels.relabel import rewrite_labels

        report = rewrite_labels(args.dataset, progress=not args.no_progress)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(f"{args.dataset}: labels of {report['rewritten']} of {report['jobs']} jobs rewritten; "
                  f"{len(report['errors'])} could not be relabelled")
            for job, why in list(report["errors"].items())[:10]:
                print(f"  {job}: {why}")
        return 0 if not report["errors"] else 1
    report = check_dataset(args.dataset, progress=not args.no_progress, labeller=args.labeller)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.dataset}: {report['identical']} of {report['jobs']} jobs relabelled to "
              f"identical values; {len(report['mismatched'])} differing values; "
              f"{len(report['errors'])} jobs could not be relabelled")
        for m in report["mismatched"][:10]:
            print(f"  {m['job_id']} {m['metric']}: table {m['table']!r}, relabelled {m['relabelled']!r}")
        for job, why in list(report["errors"].items())[:10]:
            print(f"  {job}: {why}")
    return 0 if not report["mismatched"] and not report["errors"] else 1


def cmd_corun(args: argparse.Namespace) -> int:
    from driple.collect.corun import MIN_OVERLAP_S, CoRunInterrupted, load_corun_grid, run_coruns
    from driple.collect.job import JobSpec
    from driple.collect.provenance import record
    from driple.settings import parse_setting

    if bool(args.jobs) == bool(args.grid):
        raise DripleError("give either two or more JOBs or --grid FILE")
    grid = load_corun_grid(args.grid) if args.grid else {"coruns": [[JobSpec.parse(j) for j in args.jobs]]}
    if any(len(group) < 2 for group in grid["coruns"]):
        raise DripleError("a co-run needs at least two jobs")
    setting = parse_setting(args.setting or grid.get("setting") or "cpu-ddp-w2-lo")
    seconds = float(args.seconds or grid.get("seconds") or 10.0)
    warmup = args.warmup if args.warmup is not None else grid.get("warmup")
    if warmup is not None:
        grid["coruns"] = [[JobSpec.from_dict({**s.to_dict(), "warmup": warmup}) for s in group]
                          for group in grid["coruns"]]
    from driple.zoo.workload import check_models

    check_models([s.model for group in grid["coruns"] for s in group])
    out = Path(args.out) if args.out else Path("runs") / f"corun-{setting.id}"
    refuse_shipped(out, args.overwrite_shipped)
    record(out, setting=setting.id, seconds=seconds, coruns=len(grid["coruns"]))

    def show(result):
        if args.json:
            print(json.dumps(result.row, default=str), flush=True)
        else:
            print(format_corun(result.row), flush=True)

    if not args.json:
        print(f"running {len(grid['coruns'])} co-run(s) in {setting.id}, {seconds:g} s per job after warm-up ...",
              file=sys.stderr)
    try:
        counts = run_coruns(grid["coruns"], setting, seconds, out, skip_done=bool(args.grid), on_result=show,
                            host_lock=args.host_lock,
                            timeout=args.timeout, period_s=args.period,
                            min_overlap_s=MIN_OVERLAP_S if args.min_overlap is None else args.min_overlap)
    except CoRunInterrupted as stop:
        show(stop.result)
        print(f"driple: co-run interrupted; rows are in {out / 'coruns.csv'}", file=sys.stderr)
        return 130
    if not args.json:
        print(f"{counts['total']} co-runs: {counts['skipped']} done before, {counts['ok']} ok, "
              f"{counts['failed']} failed -> {out / 'coruns.csv'}", file=sys.stderr)
    return 0 if counts["failed"] == 0 else 1


def format_corun(row: dict) -> str:
    """A co-run row: its jobs, overlap window and combined mean load per resource."""
    from driple.metrics import resources

    lines = [f"co-run {row['corun_id']}  setting {row['setting']}  status {row['status']}"]
    if row["status"] != "ok":
        lines.append(f"  reason: {row['reason']}")
    for j in row["job_ids"]:
        lines.append(f"  job {j}")
    if row.get("per_job"):
        lines.append(f"  overlap {row['overlap_start_s']:.2f}..{row['overlap_end_s']:.2f} s "
                     f"({row['overlap_s']:.2f} s measured together)")
        names = [r.name for r in resources()]
        head = "".join(f"{r:>12}" for r in names)
        lines.append(f"  {'mean per worker':<24}{head}")
        for j, means in row["per_job"].items():
            lines.append(f"  {j[-24:]:<24}" + "".join(f"{means[r]:>12.4g}" for r in names))
        lines.append(f"  {'combined':<24}" + "".join(f"{row[r + '_mean']:>12.4g}" for r in names))
        lines.append(f"  {'unit':<24}" + "".join(f"{r.unit:>12}" for r in resources()))
    lines.append(f"  wall time {row['duration_s']:.1f} s")
    return "\n".join(lines)


def cmd_cleanup(args: argparse.Namespace) -> int:
    from driple.collect.netns import remove_stale, require_root

    require_root()
    removed = remove_stale(all_owners=args.all)
    print(f"removed {len(removed)}: {' '.join(removed)}" if removed else "nothing to remove")
    return 0
