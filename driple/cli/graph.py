"""``driple zoo`` and ``driple graph``: list the built-in models, build a model's grouped graph."""
from __future__ import annotations

import argparse
import json
import sys

from driple.collect.job import parse_knobs
from driple.errors import DripleError
from driple.strategies import get_strategy, strategy_names
from driple.zoo.optim import OPTIMIZERS
from driple.zoo.workload import PROTOCOL


def register(sub: argparse._SubParsersAction) -> None:
    zoo = sub.add_parser(
        "zoo", help="list the built-in models and their knobs",
        description="List the built-in model zoo: every family and named preset, its knobs with "
        "their defaults, and the default batch size. Any name can be used with `driple graph`, "
        "`driple collect run` and `driple predict`; knobs are overridden with --set knob=value.",
    )
    zoo.add_argument("--json", action="store_true", help="print the zoo as JSON")
    zoo.set_defaults(func=run_zoo)

    graph = sub.add_parser(
        "graph", help="trace a training step into the grouped graph the inspector reads",
        description="Trace one training step (forward, loss, backward, optimizer update) of a zoo "
        "model or your own with fake tensors, add the communication of the distributed strategy, "
        "group the op graph into communities and print a summary. Nothing is computed for real.",
        epilog="examples:\n  driple graph resnet18 --batch-size 32\n"
               "  driple graph mymodels.py:build --batch-size 8 --set layers=4\n\n" + PROTOCOL,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    graph.add_argument("model", help="zoo model name (see `driple zoo`), or your own factory as "
                       "module:function or file.py:function (see below); only the code you name is run")
    graph.add_argument("--batch-size", type=int, default=None, help="per-worker batch size (default: the model's)")
    graph.add_argument("--optimizer", default="sgd",
                       help=f"{', '.join(OPTIMIZERS)} (default: sgd, with momentum 0.9)")
    graph.add_argument("--strategy", default="ddp", choices=[*strategy_names(), "none"],
                       help="; ".join(f"{s}: {get_strategy(s).comm_units}" for s in strategy_names())
                       + "; none: single process")
    graph.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    graph.add_argument("--servers", type=int, default=1,
                       help="parameter servers, for a strategy that has them (default 1)")
    graph.add_argument("--groups", type=int, default=100, help="number of groups M (default 100)")
    graph.add_argument("--grouping", default="uniform", choices=["uniform", "proportional", "none"],
                       help="how many groups each graph gets (default uniform: M for every graph)")
    graph.add_argument("--features", default="driple", choices=["driple", "rich"],
                       help="per-group features: the paper's three, or richer (FLOPs, traffic, phases)")
    graph.add_argument("--seed", type=int, default=42, help="seed of the fluid-community grouping")
    graph.add_argument("--set", dest="knobs", action="append", metavar="KNOB=VALUE",
                       help="model knob (a zoo knob, or a keyword argument of your factory), "
                       "e.g. --set depth=50 (repeatable)")
    graph.add_argument("--out", help="save the torch_geometric Data to this .pt file")
    graph.add_argument("--json", action="store_true", help="print the summary as JSON")
    graph.set_defaults(func=run_graph)


def run_zoo(args: argparse.Namespace) -> int:
    from driple.zoo import list_models

    specs = list_models()
    if args.json:
        rows = [{"name": s.name, "family": s.family, "preset": s.preset, "description": s.description,
                 "default_batch_size": s.default_batch_size, "knobs": s.knobs} for s in specs]
        json.dump(rows, sys.stdout, indent=2, default=str)
        print()
        return 0
    width = max(len(s.name) for s in specs)
    for family in dict.fromkeys(s.family for s in specs):
        print(f"{family}")
        for s in (s for s in specs if s.family == family):
            knobs = ", ".join(f"{k}={v}" for k, v in s.knobs.items())
            tag = "preset" if s.preset else "family"
            print(f"  {s.name:<{width}}  [{tag}, batch {s.default_batch_size}] {s.description}")
            print(f"  {'':<{width}}  knobs: {knobs}")
    return 0


def run_graph(args: argparse.Namespace) -> int:
    import torch

    from driple.graph.build import build_zoo_input

    if args.workers < 1:
        raise DripleError(f"--workers {args.workers}: a job has at least one worker")
    if args.strategy == "ps" and args.servers < 1:
        raise DripleError(f"--servers {args.servers}: a parameter-server job has at least one server")
    torch.set_num_threads(1)
    data = build_zoo_input(
        args.model, batch_size=args.batch_size, optimizer=args.optimizer, strategy=args.strategy,
        workers=args.workers, servers=args.servers, groups=args.groups, grouping=args.grouping,
        features=args.features, seed=args.seed, **parse_knobs(args.knobs),
    )
    s = data.summary
    if args.out:
        torch.save(data.to_dict(), args.out)
        s["saved_to"] = args.out
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        print()
        return 0
    buckets = s["buckets_mb"]
    comm_kind = get_strategy(s["strategy"]).comm_units if s["strategy"] != "none" else ""
    print(f"{s['model']} ({s['family']}), batch {s['batch_size']}, optimizer {s['optimizer']}, "
          f"{s['strategy']} with {s['workers']} worker(s)" + (f", {s['servers']} server(s)" if s["servers"] else ""))
    print(f"  op nodes        {s['ops']:>10,}   edges {s['edges']:,}")
    print(f"  parameters      {s['params']:>10,}   ({s['params'] * 4 / 1e6:.1f} MB fp32)")
    print(f"  compute         {s['gflops']:>10.2f} GFLOP per step")
    print(f"  activations     {s['activation_mb']:>10.1f} MB (forward outputs)")
    print(f"  communicated    {s['comm_mb']:>10.2f} MB sent per worker per step"
          + (f" in {len(buckets)} {comm_kind}" if buckets else ""))
    print(f"  groups          {s['groups']:>10}   ({s['dropped_ops']} ops outside the largest component)")
    print(f"  features        {data.x.shape[1]:>10}   ({data.feature_set})")
    print(f"  time            {s['total_s']:>10.2f} s  (trace {s['trace_s']:.2f}, graph {s['graph_s']:.2f}, "
          f"group {s['group_s']:.2f})")
    if args.out:
        print(f"  saved           {args.out}")
    return 0
