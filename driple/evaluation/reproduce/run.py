"""Running the sections: one after the other, or as ``--jobs`` processes side by side whose
JSON is merged into the output directory.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil

from driple.evaluation.reproduce.context import Context, say, section_files
from driple.evaluation.reproduce.accuracy import section_accuracy
from driple.evaluation.reproduce.colocate import section_colocate
from driple.evaluation.reproduce.design import section_design
from driple.evaluation.reproduce.labels import section_labels
from driple.evaluation.reproduce.outofzoo import out_of_zoo_sets, out_of_zoo_setting, section_outofzoo
from driple.evaluation.reproduce.retest import section_retest
from driple.evaluation.reproduce.transfer import section_transfer


#: Each section's run, in the order the sections run by default.
SECTION_RUNS = {"labels": section_labels, "retest": section_retest, "accuracy": section_accuracy,
                "outofzoo": section_outofzoo, "colocate": section_colocate, "transfer": section_transfer,
                "design": section_design}
SECTIONS = tuple(SECTION_RUNS)


def run_side_by_side(ctx: Context, sections: list[str]) -> None:
    """The sections as ``--jobs`` processes side by side: the accuracy of each setting in a
    process of its own, the other sections in one more; each child has its own work and output
    directories, reads one graph cache built here first, and its JSON is merged into
    ``ctx.out`` (accuracy by setting). Every JSON's ``command`` is this run's."""
    import multiprocessing as mp
    import tempfile

    a = ctx.args
    if ctx.work:
        os.makedirs(ctx.work, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="reproduce-", dir=ctx.work)
    # without a work directory the children read the datasets in place, and their graphs from
    # each dataset's own cache (as a run without --jobs does: nothing rebuilt that is cached)
    graph_cache = a.graph_cache or (os.path.join(ctx.work, "graph-cache") if ctx.work else None)
    say(f"side by side ({a.jobs} processes); building every missing graph first into "
         f"{graph_cache or 'the graph cache beside each dataset'}")
    a.graph_cache = graph_cache
    settings = ctx.settings()
    for setting in settings:  # one builder, so that no two processes write one cache entry
        ctx.dataset(setting, ctx.inspector(setting).build_options())
    if "outofzoo" in sections:
        for root in out_of_zoo_sets(a):
            if os.path.exists(os.path.join(root, "results.csv")):
                setting = out_of_zoo_setting(root)
                ctx.dataset(setting, ctx.inspector(setting).build_options(), root=root)

    children = []
    if "accuracy" in sections:
        children += [(["accuracy"], [s]) for s in settings]
    rest = [s for s in sections if s != "accuracy"]
    if rest:
        children.append((rest, a.settings))
    jobs = []
    for i, (secs, only) in enumerate(children):
        out = os.path.join(scratch, f"out{i}")
        os.makedirs(out)
        for name in os.listdir(ctx.out) if os.path.isdir(ctx.out) else []:
            if name.endswith(".json"):  # earlier entries that --settings keeps
                shutil.copy2(os.path.join(ctx.out, name), out)
        child = {**vars(a), "sections": ",".join(secs), "settings": only, "out": out,
                 "work_dir": os.path.join(scratch, f"work{i}") if ctx.work else None, "jobs": 1,
                 "datasets_dir": ctx.datasets, "models_dir": ctx.models}
        jobs.append(child)
    # fork: the children start from this process (its imports, its label version); the graphs
    # they read are already built
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    finished = [(j["out"], secs, only) for j, (secs, only) in zip(jobs, children)]
    pool = mp.get_context(method).Pool(min(a.jobs, len(jobs)))
    try:
        failures = [f for f in pool.map_async(run_child, jobs).get() if f]
        pool.close()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP (main turns them into this)
        pool.terminate()  # every child stopped where it is, none left running
        raise
    finally:
        pool.join()
        merge_children(ctx, finished)  # each child's JSON holds only finished sections (and settings)
        shutil.rmtree(scratch, ignore_errors=True)
    if failures:
        from driple.errors import DripleError

        raise DripleError("; ".join(failures) + f" (the sections that finished are in {ctx.out})")


def run_child(options: dict) -> str | None:
    """Run some sections in a child process; an error message, or None."""
    args = argparse.Namespace(**options)
    import torch

    from driple.errors import DripleError

    torch.set_num_threads(args.threads)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)
    try:
        run_sections(Context(args), args.sections.split(","))
    except DripleError as err:
        return f"{args.sections} {args.settings or ''}: {err}"
    return None


def run_sections(ctx: Context, sections: list[str]) -> None:
    for section in sections:
        SECTION_RUNS[section](ctx)


def merge_children(ctx: Context, children: list[tuple[str, list[str], list[str] | None]]) -> None:
    """Children's JSON into ``ctx.out``. ``children``: (output directory, the sections it ran,
    the settings it ran them for; None: all). Each child starts from a copy of the earlier
    JSON (what ``--settings`` keeps), so only what a child ran is taken from it: accuracy by
    setting (the source first, over the kept entries), every other section's file from the
    child that ran it."""
    os.makedirs(ctx.out, exist_ok=True)
    merged, first = ctx.kept("accuracy", "settings"), None
    for out, sections, only in children:
        for section in sections:
            path = os.path.join(out, f"{section}.json")
            if not os.path.exists(path):
                continue
            if section == "accuracy":
                data = json.load(open(path))
                first = first or data
                merged.update({s: e for s, e in (data.get("settings") or {}).items()
                               if only is None or s in only})
            else:  # with the section's files per setting (outofzoo-<setting>.json)
                for name in [f"{section}.json", *section_files(out, section)]:
                    shutil.copy2(os.path.join(out, name), os.path.join(ctx.out, name))
    if first is not None:
        source = first.get("source")
        order = sorted(merged, key=lambda s: s != source)
        ctx.save("accuracy", {"settings": {s: merged[s] for s in order}, "source": source,
                              "command_of_a_row": first.get("command_of_a_row")})
