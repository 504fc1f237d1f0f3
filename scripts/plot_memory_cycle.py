#!/usr/bin/env python
"""Draw measured jobs' memory curves beside the simulated cycles that predict their burst and idle.

    python scripts/plot_memory_cycle.py --dataset datasets/v2/cpu-fsdp-w2-lo resnet-bs16-... gpt-bs16-... --out cycles.png
    python scripts/plot_memory_cycle.py --dataset datasets/v2/cpu-fsdp-w2-lo --worst 4 --out worst.png

One panel per job: the first worker's middle measured iteration (allocated MB as the collector
read it, its collectives shaded) and the job's step traced again and placed as the memory
duration prediction places it (``driple/graph/memory_cycle.py``, with the setting's fit in
``memory.json``), each with its midpoint and where its tail starts. ``--worst N`` picks the N
jobs whose predicted share above the midpoint is furthest from the measured one (every job of
the dataset is traced: about a minute per 150 jobs).
"""
import argparse
import os
import sys

from driple.errors import DripleError


def worst_jobs(dataset: str, n: int, figures) -> list:
    """The ``n`` job ids of ``dataset`` whose simulated share is furthest from the measured."""
    import numpy as np

    from driple.evaluation.memory import simulated_cycles
    from driple.evaluation.memory_plot import setting_fit
    from driple.inspector.dataset import read_results

    frame = read_results(os.path.join(dataset, "results.csv"), 10.0).reset_index(drop=True)
    fit, f_s, b_s = setting_fit(str(frame["setting"].iloc[0]), figures)
    cycles = simulated_cycles(frame, progress=True)
    share = np.array([np.nan if c is None else fit.burst_fraction(c, f_s, b_s) for c in cycles])
    burst, idle = frame["memory_burst_duration"].to_numpy(float), frame["memory_idle_duration"].to_numpy(float)
    off = np.abs(share - burst / (burst + idle))
    order = [i for i in np.argsort(-np.nan_to_num(off, nan=-1.0)) if np.isfinite(off[i])]
    return [str(frame["job_id"].iloc[i]) for i in order[:n]]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("jobs", nargs="*", metavar="JOB_ID", help="job ids of the dataset")
    p.add_argument("--dataset", required=True, help="a collector dataset directory (results.csv, raw/)")
    p.add_argument("--worst", type=int, default=0, metavar="N",
                   help="also draw the N jobs whose predicted share is furthest from the measured")
    p.add_argument("--figures", default=None, metavar="FILE",
                   help="the memory.json with the setting's cycle fit (default: the registry's evaluations)")
    p.add_argument("--out", required=True, help="image to write (.png, .pdf, .svg)")
    a = p.parse_args(argv)
    if not a.jobs and a.worst <= 0:
        p.error("name job ids, or --worst N")
    if not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        p.error(f"--out {a.out}: no such directory")
    from driple.evaluation.memory_plot import job_curves, plot_jobs

    try:
        jobs = list(a.jobs) + (worst_jobs(a.dataset, a.worst, a.figures) if a.worst > 0 else [])
        curves = [job_curves(a.dataset, j, a.figures) for j in dict.fromkeys(jobs)]
        plot_jobs(curves, a.out)
    except DripleError as err:
        print(f"plot_memory_cycle: error: {err}", file=sys.stderr)
        return 2
    for c in curves:
        print(f"{c['job_id']}: above the midpoint {c['measured']['share']:.3f} of the step measured, "
              f"{c['simulated']['share']:.3f} simulated; tail {c['measured']['tail']:.3f} measured, "
              f"{c['simulated']['tail']:.3f} fitted")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
