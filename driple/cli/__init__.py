"""The ``driple`` command line: thin wrappers that parse, call the library and print.

Each sub-command group lives in its own module here and exposes ``register(subparsers)``;
the module is imported only when its command runs, so ``driple --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from driple.errors import DripleError

# command name -> (module under driple.cli, one-line help)
COMMANDS = {
    "predict": ("predict", "predict a training job's 12 burst/idle metrics with intervals"),
    "settings": ("predict", "list the shipped inspectors (one per setting)"),
    "colocate": ("predict", "estimate how well jobs share a host or link"),
    "compare-strategies": ("predict", "one job under DDP, FSDP and parameter server, side by side"),
    "zoo": ("graph", "list the built-in models and their knobs"),
    "graph": ("graph", "trace a training step into the grouped graph the inspector reads"),
    "hardware": ("hardware", "probe this machine into the hardware spec predictions name"),
    "gpu-memory": ("gpu", "whether a job fits on a GPU, and the largest batch that does"),
    "collect": ("collect", "run real distributed jobs and measure burst/idle of each resource"),
    "train": ("inspector", "train an inspector on a measured dataset"),
    "evaluate": ("inspector", "score an inspector against baselines on a dataset"),
    "finetune": ("inspector", "transfer an inspector to a new setting with little data"),
    "simulate": ("schedule", "simulate a cluster scheduler that packs jobs by driple's predictions"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="driple",
        description="Predict how a distributed training job will use compute, memory and "
        "network (burst amount, burst duration, idle duration) before it runs.",
    )
    from driple import __version__

    parser.add_argument("--version", action="version", version=f"driple {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    registered = set()
    for name, (module, _help) in COMMANDS.items():
        if module in registered:
            continue
        registered.add(module)
        if importlib.util.find_spec(f"driple.cli.{module}") is not None:
            importlib.import_module(f"driple.cli.{module}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status (0 ok, 2 user error, 130
    Ctrl-C, 143 SIGTERM: see :mod:`driple.interrupts`)."""
    from driple import interrupts

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    interrupts.reset()
    interrupts.restore_ctrl_c()
    try:
        code = int(args.func(args) or 0)
        return interrupts.exit_status() if code == 130 else code
    except DripleError as err:
        print(f"driple: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("driple: interrupted", file=sys.stderr)
        return interrupts.exit_status()
