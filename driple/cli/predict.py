"""``driple predict``, ``driple settings`` and ``driple colocate``: what schedulers call."""
from __future__ import annotations

import argparse
import functools
import json
import sys

from driple.collect.job import JobSpec, parse_knobs
from driple.zoo.optim import OPTIMIZERS
from driple.zoo.workload import PROTOCOL
from driple.errors import DripleError

_MODEL_HELP = ("zoo model name (see `driple zoo`), or your own factory as module:function or "
               "file.py:function returning a workload (model, make_batch, optional loss_fn) or an "
               "nn.Module with an input_shape attribute (see below); only the code you name is run")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The job a command is about: MODEL, ``--batch-size``, ``--optimizer`` and ``--set`` knobs
    (``predict``, ``compare-strategies``, ``gpu-memory``)."""
    parser.add_argument("model", help=_MODEL_HELP)
    parser.add_argument("--batch-size", type=int, default=None, help="per-worker batch size (default: the model's)")
    parser.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS, help="default sgd")
    parser.add_argument("--set", dest="knobs", action="append", metavar="KNOB=VALUE",
                        help="model knob, e.g. --set depth=50 (repeatable)")


def register(sub: argparse._SubParsersAction) -> None:
    pr = sub.add_parser(
        "predict", help="predict a training job's 12 burst/idle metrics",
        description="Predict, before it runs, how one worker of a distributed training job will "
        "use compute, memory and the network (TX, RX): burst amount, burst duration and idle "
        "duration of each, with a prediction interval, from a shipped inspector of the setting. "
        "The training step is traced with fake tensors (nothing is trained). A model of a family "
        "the inspector did not train on (your own, a Hugging Face model) gets intervals calibrated "
        "on held-out families, and the output says so.",
        epilog="examples:\n  driple predict resnet50 --batch-size 32\n"
               "  driple predict resnet --set depth=56 --optimizer adam --json\n"
               "  driple predict mypkg.models:build --batch-size 16 --plot profile.png\n\n" + PROTOCOL,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(pr)
    pr.add_argument("--setting", default=None,
                    help="setting id of a shipped inspector (see `driple settings`; default: the "
                    "registry's default) or a path to a checkpoint (a setting id wins over a local "
                    "folder of the same name: write ./NAME for the folder)")
    pr.add_argument("--strategy", default=None,
                    help="use the shipped inspector of this strategy (ddp, fsdp, ps; the default "
                    "setting's network first) instead of naming its setting")
    pr.add_argument("--plot", metavar="PNG", help="draw the expected periodic series of each resource")
    pr.add_argument("--seconds", type=float, default=2.0, help="length of the --plot series (default 2 s)")
    pr.add_argument("--hardware", default="trained", metavar="trained|this|SPEC.json",
                    help="the machine to predict for: 'trained' (the one the inspector's jobs were "
                    "measured on, default), 'this' (this host, probed now: a few seconds), or a "
                    "spec file written by `driple hardware probe --json`; durations and step time "
                    "are carried over by the inspector's roofline")
    pr.add_argument("--memory", action="store_true",
                    help="also print the simulated memory's breakdown at its peak (parameters, "
                    "gradients, optimizer state, activations, communication, runtime) and the "
                    "largest batch per worker that fits a worker's memory (a few more simulations; "
                    "also in --json as memory.largest_batch)")
    pr.add_argument("--json", action="store_true", help="print the profile as JSON")
    pr.set_defaults(func=run_predict)

    st = sub.add_parser(
        "settings", help="list the shipped inspectors",
        description="List the shipped inspectors: the setting each predicts for, what it was "
        "measured on, how it was trained and its error on held-out jobs. The registry is looked "
        "for in $DRIPLE_MODELS when set, else in the installed package, the repository's "
        "trained_models/, then ~/.local/share/driple/models; none found is an error (exit 2).")
    st.add_argument("--json", action="store_true", help="print the registry entries as JSON")
    st.add_argument("--check-host", action="store_true",
                    help="benchmark this host (about a second: single-thread GEMM and copy) and "
                    "compare it with the host each inspector's labels were measured on (CPU "
                    "model, speed ratios): whether its predictions describe jobs here")
    st.set_defaults(func=run_settings)

    cs = sub.add_parser(
        "compare-strategies", help="one job under DDP, FSDP and parameter server, side by side",
        description="Trace MODEL's training step under every strategy (2 workers; 1 server for a "
        "parameter server) and print, per strategy: the simulated peak memory of one rank, the "
        "bytes a worker sends and receives per step, and the predicted step time and memory per "
        "rank where an inspector of that setting ships (with the machine it describes). Then which "
        "strategy is fastest and which holds the least memory per rank.",
        epilog="example:\n  driple compare-strategies gpt2_small --batch-size 2 --optimizer adamw",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(cs)
    cs.add_argument("--network", default="lo", help="lo (one host, default) or a link rate such as 1g")
    cs.add_argument("--hardware", default="trained", metavar="trained|this|SPEC.json",
                    help="the machine the step times describe (as for predict)")
    cs.add_argument("--json", action="store_true", help="print the rows and verdicts as JSON")
    cs.set_defaults(func=run_compare_strategies)

    co = sub.add_parser(
        "colocate", help="estimate how well jobs share a host or link",
        description="Predict each JOB's profile, then estimate what happens when they share a "
        "device and a link: combined mean load per resource against capacity, how often their "
        "bursts collide (independent random phases), how often demand exceeds capacity, and "
        "which pairs pack well.",
        epilog="JOB is MODEL[,knob=value...] with the special knobs bs= (batch size) and opt= "
               "(optimizer), e.g.\n  driple colocate resnet50,bs=32 gpt2_small,bs=8 mlp,bs=256,opt=adam",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    co.add_argument("jobs", nargs="+", metavar="JOB", help="MODEL[,knob=value...], at least two")
    co.add_argument("--setting", default=None, help="setting id or checkpoint path (as for predict)")
    co.add_argument("--cores", type=float, default=None,
                    help="cores of one worker slot (default: this host's cores / the setting's "
                    "ranks on loopback, e.g. 1 for cpu-ddp-w2-lo on 2 cores)")
    co.add_argument("--link-mbps", type=float, default=None,
                    help="link capacity in MB/s per direction (default: from the setting: 125 for "
                    "1g, 1250 for 10g; unlimited for loopback)")
    co.add_argument("--json", action="store_true", help="print the report as JSON")
    co.set_defaults(func=run_colocate)


# ---------------------------------------------------------------------- predict
def _predictor(setting, hardware="trained"):
    from driple.predict.predictor import Predictor

    return Predictor.load(setting, hardware=hardware)


def _not_empty(args: argparse.Namespace, *names: str) -> None:
    """An option given as an empty string is a mistake, not a request for the default."""
    for name in names:
        if getattr(args, name, None) == "":
            raise DripleError(f"--{name.replace('_', '-')} is empty; give a value or leave the option out")


def run_predict(args: argparse.Namespace) -> int:
    import time

    from driple.predict.formatting import format_profile

    _not_empty(args, "setting", "plot", "hardware")
    t0 = time.perf_counter()
    if args.strategy:
        if args.setting:
            raise DripleError("give --setting or --strategy, not both")
        args.setting = _setting_of_strategy(args.strategy)
    predictor = _predictor(args.setting, args.hardware)
    knobs = parse_knobs(args.knobs)
    profile = predictor.predict_job(args.model, batch_size=args.batch_size,
                                    optimizer=args.optimizer, knobs=knobs)
    if args.memory and profile.memory:
        heap = (profile.memory.get("breakdown_mb") or {}).get("libraries", 0.0)
        found = predictor.largest_batch(args.model, args.optimizer, knobs, start=args.batch_size or 1,
                                        library_heap_mb=heap)
        if found is not None:
            profile.memory["largest_batch"] = found
    elapsed = time.perf_counter() - t0
    if args.json:
        out = profile.to_dict()
        out["inspector"] = {k: v for k, v in predictor.describe().items() if k != "intervals"}
        if out["inspector"].get("unseen_family"):  # its modes, families and figures; not the arrays
            out["inspector"]["unseen_family"] = {k: v for k, v in out["inspector"]["unseen_family"].items()
                                                 if k != "intervals"}
        out["timings_s"] = {**predictor.timings, "total": elapsed}
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        print(format_profile(profile, predictor.describe()))
        if args.memory:
            from driple.predict.formatting import memory_breakdown

            print("\n" + (memory_breakdown(profile.memory) if profile.memory else
                          "no simulated memory for this inspector (its registry entry has no memory fit)"))
    if args.plot:  # after the prediction is printed: a plot that cannot be written loses nothing
        _plot(profile, args.plot, args.seconds, quiet=args.json)
    return 0


def _setting_of_strategy(strategy: str) -> str:
    """The shipped setting of ``strategy``: on the default setting's network when there is one."""
    from driple.predict.registry import list_settings
    from driple.settings import parse_setting
    from driple.strategies import get_strategy

    get_strategy(strategy)  # an unknown name lists the known ones
    entries = list_settings()
    default = next((parse_setting(e["setting"]) for e in entries if e["default"]), None)
    mine = [parse_setting(e["setting"]) for e in entries if parse_setting(e["setting"]).strategy == strategy]
    if not mine:
        raise DripleError(f"no shipped inspector for strategy {strategy!r} (shipped: "
                          f"{', '.join(e['setting'] for e in entries)}); `driple compare-strategies "
                          "MODEL` still shows its simulated memory and network per step")
    mine.sort(key=lambda s: (default is None or s.network != default.network, s.id))
    return mine[0].id


def run_compare_strategies(args: argparse.Namespace) -> int:
    from driple.predict.compare import compare_strategies, verdicts
    from driple.settings import Setting

    _not_empty(args, "network", "hardware")
    Setting(strategy="ddp", network=args.network)  # an unknown network is refused here, in words
    rows = compare_strategies(args.model, batch_size=args.batch_size, optimizer=args.optimizer,
                              knobs=parse_knobs(args.knobs), network=args.network, hardware=args.hardware)
    verdict = verdicts(rows)
    if args.json:
        json.dump({"model": args.model, "batch_size": args.batch_size, "optimizer": args.optimizer,
                   "network": args.network, "rows": rows, **verdict}, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.model}, batch {args.batch_size or 'default'}, {args.optimizer}, 2 workers on {args.network}")
    print(f"  {'strategy':<9} {'setting':<16} {'step time (90% interval)':<28} {'MB/rank (90% interval)':<24} "
          f"{'sim. peak MB':>12} {'tx MB/step':>10} {'rx MB/step':>10}")
    for r in rows:
        if r["step_time_s"] is None:
            step, memory = "no shipped inspector", "-"
        else:
            lo, hi = r["step_time_interval_s"]
            step = f"{r['step_time_s'] * 1e3:.1f} ms ({lo * 1e3:.0f}-{hi * 1e3:.0f})"
            mlo, mhi = r["memory_interval_mb"]
            memory = f"{r['memory_mb']:.0f} ({mlo:.0f}-{mhi:.0f})"
        print(f"  {r['strategy']:<9} {r['setting']:<16} {step:<28} {memory:<24} {r['memory_peak_mb']:>12.1f} "
              f"{r['tx_mb_per_step']:>10.2f} {r['rx_mb_per_step']:>10.2f}")
    machines = sorted({r["measured_on"] for r in rows if r.get("measured_on")})
    if machines:
        print(f"step times describe: {', '.join(machines)}"
              + ("" if verdict["same_machine"] else " (different machines: use --hardware this "
                 "or a spec file to compare the strategies on one)"))
    print(f"fastest: {verdict['fastest'] or 'unknown (no step time)'}"
          + (f"; least memory per rank, predicted: {verdict['least_memory_predicted']}"
             if verdict["least_memory_predicted"] else ""))
    print(f"least simulated peak per rank: {verdict['least_memory']} (model state, activations and the "
          "strategy's buffers, every strategy alike; the runtime's own heap left out)")
    print("MB/rank: the shipped inspector's memory (peak allocated per iteration, the simulator with "
          "the setting's fit)")
    return 0


def _plot(profile, path: str, seconds: float, quiet: bool) -> None:
    from driple.predict.profile import plot_profile

    try:
        plot_profile(profile, path, seconds=seconds)
    except OSError as exc:
        raise DripleError(f"cannot write the plot to {path} ({exc.strerror or exc}); the prediction "
                          "above is complete") from None
    if not quiet:
        print(f"expected series -> {path}")


# ---------------------------------------------------------------------- settings
def run_settings(args: argparse.Namespace) -> int:
    from driple.predict.registry import list_settings, models_dir, no_inspector_message, sha256

    entries = list_settings()
    if not entries:
        raise DripleError(no_inspector_message())
    for e in entries:  # a tampered or truncated checkpoint is named here, not first at predict time
        path = models_dir() / e.get("path", "")
        e["checksum_ok"] = path.is_file() and sha256(path) == e.get("sha256")
    broken = [e["setting"] for e in entries if not e["checksum_ok"]]
    if args.check_host:
        for e in entries:
            e["host_check"] = _host_check(e["setting"])
    if args.json:
        json.dump(entries, sys.stdout, indent=2)
        print()
        return 2 if broken else 0
    for e in entries:
        star = " (default)" if e["default"] else ""
        print(f"{e['setting']}{star}")
        if not e["checksum_ok"]:
            print(f"  CHECKSUM FAILS: {models_dir() / e.get('path', '')} is missing or differs from "
                  "the registry's SHA-256; it will not load")
        print(f"  {e.get('description', '')}")
        print(f"  trained: {e.get('trained', '?')}")
        if e.get("hardware"):
            print(f"  measured on: {e['hardware']} (the predictions describe jobs on this hardware)")
        held = (e.get("resident") or {}).get("memory")
        if isinstance(held, (int, float)):
            print(f"  resident memory: {held:.0f} MB per worker beside the predicted peak (runtime; "
                  "added by colocate)")
        s = e.get("scores") or {}
        parts = []
        if s.get("test_nrmse_mean") is not None:
            parts.append(f"mean NRMSE {s['test_nrmse_mean']:.3f}")
        if s.get("test_mape_mean") is not None:
            parts.append(f"mean MAPE {s['test_mape_mean']:.0f}%")
        if s.get("n_test"):
            parts.append(f"on {s['n_test']} held-out jobs")
        if s.get("interval_coverage") is not None:
            parts.append(f"interval coverage {s['interval_coverage']:.0%} "
                         f"(nominal {s.get('nominal_coverage', 0.9):.0%})")
        if parts:
            print(f"  scores: {', '.join(parts)}")
        u = e.get("unseen") or {}
        if u.get("step_time_mape") is not None:
            print(f"  a model of another family (yours): step time MAPE {u['step_time_mape']:.1f}%, median MAPE "
                  f"{u['median_mape']:.1f}% on {u.get('folds', '?')} held-out families (each by an inspector trained without it), interval "
                  f"coverage {u.get('coverage') or 0:.0%} (cross-fitted)" + ("; roofline joined as chosen there" if u.get("roofline_modes") else ""))
        mem = e.get("memory") or {}
        if mem.get("lofo_mape") is not None:
            print(f"  memory amount: simulated from the traced step (runtime {mem['offset_mb']:.0f} MB + "
                  f"{mem['scale']:.3f} x the simulation; MAPE {mem['lofo_mape']:.1f}% on held-out families)")
        cycle = mem.get("cycle") or {}
        if cycle.get("held_out"):
            h = cycle["held_out"]
            print(f"  memory burst and idle: the simulated cycle's share of the {cycle.get('step', 'predicted')} step "
                  f"(MAPE {h['burst_mape']:.1f}% and {h['idle_mape']:.1f}% on held-out families)")
        if e.get("card"):
            print(f"  model card: {models_dir() / e['card']}")
        check = e.get("host_check")
        if check is not None:
            mark = "matches" if check["matches"] else "DIFFERS"
            print(f"  this host ({check['here_cpu'] or '?'}): {mark}: GEMM {check['compute_ratio']:.2f}x, "
                  f"copy {check['memory_ratio']:.2f}x the trained-on host's; {check['advice']}")
    if broken:
        print(f"driple: error: checksum fails for {', '.join(broken)}", file=sys.stderr)
        return 2
    return 0


@functools.lru_cache(maxsize=1)
def _this_host():
    """This host's figures, measured once per run, and how busy it was just before (%)."""
    import psutil

    from driple.hardware.host_speed import measure_host_speed

    print("driple: measuring this host (about a second) ...", file=sys.stderr)
    busy = psutil.cpu_percent(interval=0.5)
    return measure_host_speed(), busy


def _host_check(setting: str) -> dict | None:
    """This host against the host figures of ``setting``'s inspector."""
    from driple.hardware.host_check import compare_hosts

    trained = _predictor(setting).inspector.host
    if trained is None:
        return None  # a checkpoint without host figures (the paper's GNN) has nothing to compare
    here, busy = _this_host()
    return compare_hosts(setting, trained, here, busy_pct=busy).to_dict()


# ---------------------------------------------------------------------- colocate
def run_colocate(args: argparse.Namespace) -> int:
    from driple.predict.colocate import colocate, rank_pairs, slot_capacity
    from driple.predict.formatting import format_colocation

    if len(args.jobs) < 2:
        raise DripleError("give at least two jobs to co-locate")
    predictor = _predictor(args.setting)
    jobs = [JobSpec.parse(text) for text in args.jobs]
    profiles = {}
    for i, (text, job) in enumerate(zip(args.jobs, jobs)):
        profile = predictor.predict_job(job.model, batch_size=job.batch_size,
                                        optimizer=job.optimizer, knobs=job.knobs)
        profiles[f"{i + 1}:{text}"] = profile
    host = predictor.inspector.host  # memory in MB (labels v2): the trained-on host's
    capacity = slot_capacity(predictor.setting, cores=args.cores, link_mbps=args.link_mbps,
                             host_memory_mb=host.memory_mb if host is not None and host.memory_mb > 0 else None)
    report = colocate(profiles, capacity)
    pairs = rank_pairs(profiles, capacity) if len(profiles) > 2 else []
    if args.json:
        json.dump({"setting": predictor.setting, "capacity": capacity,
                   "jobs": {k: p.to_dict() for k, p in profiles.items()},
                   "report": report.to_dict(), "pairs": [p.to_dict() for p in pairs]},
                  sys.stdout, indent=2)
        print()
        return 0
    print(format_colocation(predictor.setting, profiles, capacity, report, pairs))
    return 0
