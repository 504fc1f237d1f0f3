"""``driple simulate``: a trace-driven cluster simulation of packing policies."""
from __future__ import annotations

import argparse
import json

from driple.errors import DripleError


def register(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "simulate", help="simulate a cluster scheduler that packs jobs by driple's predictions",
        description="Replay a DL cluster trace on simulated worker slots (SimPy) under a placement "
        "policy: fifo (exclusive), random (packs blindly), driple (packs where `driple colocate` "
        "predicts a fit) or oracle (the same rule on measured profiles). Each trace job runs a "
        "measured job of the catalogue (sha1 of its id mod the catalogue's size); co-located jobs "
        "slow each other down by one interference model fitted to measured co-runs. Prints "
        "average and p99 JCT, makespan, utilisation, co-location violations and the share of "
        "the oracle's gain over FIFO each policy recovers (FIFO and the oracle always run).",
        epilog="examples:\n  driple simulate --trace synthetic:1000 --policy driple --load 0.9\n"
               "  driple simulate --trace cluster_log.csv --jobs 1000 --policy all --seeds 0,1,2 --plot jct.png\n"
               "  driple simulate --trace synthetic --policy driple --noise 0,0.1,0.25,0.5 --json\n"
               "  driple simulate --check-interference",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("--trace", default=None,
                    help="a Helios cluster_log.csv, a Philly cluster_job_log (JSON) or a driple trace CSV "
                    "(job_id,arrival_s,gpus,duration_s); or synthetic[:N] for a synthetic workload "
                    "(labelled so; its distributions are assumptions)")
    sp.add_argument("--policy", default="all",
                    help="fifo, random, driple, oracle, a comma list, or all (default)")
    sp.add_argument("--nodes", type=int, default=16, help="worker slots of the cluster (default 16)")
    sp.add_argument("--jobs", type=int, default=None,
                    help="simulate N consecutive jobs of the trace from a seeded random start (default: all)")
    sp.add_argument("--load", type=float, default=None,
                    help="scale arrival times so that the offered load on the nodes is this (e.g. 0.9); "
                    "default: the trace's own times")
    sp.add_argument("--seeds", default="0", help="comma list of seeds (subsample, random policy, noise; default 0)")
    sp.add_argument("--noise", default="0",
                    help="relative noise on driple's predicted metrics, U(-x, x) per metric and job; a comma "
                    "list runs each (e.g. 0,0.1,0.25,0.5)")
    sp.add_argument("--max-overload", type=float, default=None,
                    help="share of time a resource may be overloaded for `driple colocate` to say "
                    "'packs well' (default 0.05, colocate's)")
    sp.add_argument("--catalogue", default=None,
                    help="the setting of a shipped catalogue (cpu-ddp-w2-1g, default; cpu-ps-p1w2-1g) or a "
                    "catalogue JSON (driple.schedule.catalogue.build_catalogue)")
    sp.add_argument("--held-out", action="store_true",
                    help="map trace jobs only to catalogue jobs the inspector did not train on (its "
                    "validation and test jobs): driple's predictions as for new jobs")
    sp.add_argument("--write-trace", metavar="CSV", help="also write the simulated jobs as a driple trace CSV")
    sp.add_argument("--plot", metavar="FILE", help="draw the JCT CDF of every policy (first seed and noise)")
    sp.add_argument("--json", action="store_true", help="print the summaries as JSON")
    sp.add_argument("--check-interference", action="store_true",
                    help="score the interference model on the measured co-runs (datasets/v2*/corun-*) and exit")
    sp.add_argument("--datasets", default="datasets", help="datasets root for --check-interference")
    sp.set_defaults(func=run_simulate)


def _floats(text: str, what: str) -> list:
    try:
        return [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise DripleError(f"{what} is a comma list of numbers, got {text!r}") from None


def _policies(text: str) -> list:
    from driple.schedule.policies import POLICIES, get_policy

    names = list(POLICIES) if text == "all" else [p.strip() for p in text.split(",") if p.strip()]
    for n in names:
        get_policy(n)
    return [p for p in POLICIES if p in names or p in ("fifo", "oracle")]


def _trace(args):
    from driple.schedule import trace as tr

    if not args.trace:
        raise DripleError("--trace is required: a trace file, or synthetic[:N]")
    if args.trace.startswith("synthetic"):
        _, _, n = args.trace.partition(":")
        try:
            count = int(n) if n else (args.jobs or 1000)
        except ValueError:
            raise DripleError(f"synthetic takes a job count, synthetic:N; got {args.trace!r}") from None
        return lambda seed: tr.synthetic_trace(count, seed)
    full = tr.read_trace(args.trace)
    return lambda seed: tr.subsample(full, args.jobs, seed)


def run_simulate(args) -> int:
    if args.check_interference:
        from driple.evaluation.schedule import check_interference, format_interference

        result = check_interference(args.datasets)
        print(json.dumps(result, indent=1) if args.json else format_interference(result))
        return 0
    from driple.predict.colocate import MAX_OVERLOAD
    from driple.schedule.catalogue import held_out, load_catalogue
    from driple.schedule.report import (
        aggregate,
        format_summaries,
        plot_jct_cdf,
        summaries,
    )
    from driple.schedule.simulator import run_policies
    from driple.schedule.trace import offered_load, scale_to_load, write_trace

    if args.nodes < 1:
        raise DripleError(f"--nodes must be >= 1, got {args.nodes}")
    policies = _policies(args.policy)
    seeds = [int(s) for s in _floats(args.seeds, "--seeds")]
    noises = _floats(args.noise, "--noise")
    make_trace = _trace(args)
    catalogue = load_catalogue(args.catalogue)
    if args.held_out:
        catalogue = held_out(catalogue)
    max_overload = MAX_OVERLOAD if args.max_overload is None else args.max_overload
    runs, plotted = [], False
    for noise in noises:
        for seed in seeds:
            trace = scale_to_load(make_trace(seed), args.nodes, args.load)
            if args.write_trace and not runs:
                write_trace(trace, args.write_trace)
            results = run_policies(trace, policies=policies, catalogue=catalogue, nodes=args.nodes, seed=seed,
                                   noise=noise, max_overload=max_overload)
            table = summaries(results)
            head = (f"{len(trace)} jobs of {trace.kind} trace {trace.source} on {args.nodes} nodes "
                    f"(slot: {catalogue.capacity['compute']:.0f} % compute, {catalogue.capacity['memory']:.0f} MB; "
                    f"{catalogue.setting} catalogue of {len(catalogue)} measured jobs"
                    f"{', held out from the inspector' if args.held_out else ''}), offered load "
                    f"{offered_load(trace.jobs, args.nodes):.2f}, seed {seed}, prediction noise {noise:.0%}")
            runs.append({"seed": seed, "noise": noise, "trace": trace.source, "kind": trace.kind,
                         "jobs": len(trace), "header": head, "policies": table})
            if args.plot and not plotted:
                plot_jct_cdf(results, args.plot, title=f"{len(trace)} {trace.kind} jobs, {args.nodes} nodes, "
                             f"seed {seed}, noise {noise:.0%}")
                plotted = True
    means = []
    if len(seeds) > 1:
        for noise in noises:
            tables = [r["policies"] for r in runs if r["noise"] == noise]
            means.append({"noise": noise, "seeds": seeds, "policies": aggregate(tables)})
    if args.json:
        print(json.dumps({"runs": [{k: v for k, v in r.items() if k != "header"} for r in runs],
                          "means": means}, indent=1))
    else:
        for k, r in enumerate(runs):
            if k:
                print()
            print(format_summaries(r["policies"], header=r["header"]))
        for m in means:
            print()
            print(format_summaries(m["policies"], header=f"mean over seeds {','.join(map(str, seeds))}, "
                                   f"prediction noise {m['noise']:.0%} (violations summed over the seeds)"))
        if args.plot:
            print(f"\nJCT CDF written to {args.plot}")
    return 0
