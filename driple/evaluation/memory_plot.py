"""A measured job's memory curve beside the simulated cycle that predicts its burst and idle:
where in the step the level crosses its midpoint, as measured and as placed
(:mod:`driple.graph.memory_cycle`). The picture says why a memory duration is off: a plateau
within a few MB of the midpoint, a collective that takes longer than its cost, a tail longer
than fitted (``scripts/plot_memory_cycle.py``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from driple.errors import DripleError


def setting_fit(setting: str, figures: str | None = None) -> tuple:
    """``(TailFit, flops_per_s, bytes_per_s)`` of ``setting``'s memory cycle as
    ``scripts/fit_memory.py`` fitted it (its ``memory.json``: ``figures``, else the first of
    the registry's evaluations that has the setting), whether or not profiles take it."""
    from driple.graph.memory_cycle import TailFit
    from driple.predict.registry import models_dir

    files = [Path(figures)] if figures else sorted((models_dir() / "evaluation").glob("**/memory.json"))
    for f in files:
        try:
            cycle = ((json.loads(f.read_text()).get("settings") or {}).get(setting) or {}).get("cycle")
        except (OSError, ValueError) as err:
            raise DripleError(f"{f} is not a readable memory.json ({err})") from None
        if cycle:
            return TailFit.from_dict(cycle["tail"]), cycle["rates"]["flops_per_s"], cycle["rates"]["bytes_per_s"]
    where = figures or f"{models_dir() / 'evaluation'}/**/memory.json"
    raise DripleError(f"no memory cycle fitted for {setting} in {where}; run python scripts/fit_memory.py --write")


def job_curves(dataset_dir: str, job_id: str, figures: str | None = None) -> dict:
    """The middle measured iteration of the job's first worker (``measured``: times as shares
    of it, MB, its collectives, the label's share above the midpoint and tail) and the job's
    simulated cycle placed with its setting's fit (``simulated``: times, MB over the measured
    low, midpoint, share, tail)."""
    from driple.collect.labels.timeline import span_curves, tail_fraction
    from driple.collect.timeline.record import COMM_KINDS, load_job_timelines
    from driple.evaluation.memory import simulated_cycles
    from driple.inspector.dataset import read_results

    frame = read_results(os.path.join(dataset_dir, "results.csv"), 10.0).reset_index(drop=True)
    rows = frame.index[frame["job_id"].astype(str) == str(job_id)]
    if not len(rows):
        raise DripleError(f"no job {job_id} in {dataset_dir}/results.csv")
    row = frame.loc[rows[0]]
    path = row.get("timeline_path")
    if not isinstance(path, str) or not os.path.exists(os.path.join(dataset_dir, path)):
        raise DripleError(f"job {job_id} has no timeline in {dataset_dir} (a labels-v2 row keeps raw/<job>.timeline.npz)")
    timelines = load_job_timelines(os.path.join(dataset_dir, path))
    workers = sorted(k for k, t in timelines.items() if t.meta.get("role", "worker") == "worker")
    if not workers:
        raise DripleError(f"job {job_id}'s timeline has no worker")
    tl = timelines[workers[0]]
    iters = tl.iters[int(tl.meta.get("warmup", 0)):]
    if not len(iters) or not len(tl.mem):
        raise DripleError(f"job {job_id}'s worker has no measured iteration with memory samples")
    lo, hi = (int(v) for v in iters[len(iters) // 2])
    curve = next(span_curves(tl.mem, np.array([[lo, hi]])), None)  # the curve as the label reads it
    if curve is None:
        raise DripleError(f"job {job_id}'s worker has no memory sample in its middle measured iteration")
    times, mb = (curve[1][:-1] - lo) / (hi - lo), curve[2] / 2**20
    blocking = [COMM_KINDS[k] for k in ("allgather", "reducescatter", "allreduce")]
    comm = tl.comm[np.isin(tl.comm[:, 2], blocking) & (tl.comm[:, 3] >= lo) & (tl.comm[:, 3] < hi)]
    burst, idle = float(row["memory_burst_duration"]), float(row["memory_idle_duration"])

    cycle = simulated_cycles(frame.loc[[rows[0]]].reset_index(drop=True))[0]
    if cycle is None:
        raise DripleError(f"job {job_id}'s model could not be traced again")
    fit, f_s, b_s = setting_fit(str(row["setting"]), figures)
    tail = fit.tail(cycle, f_s, b_s)
    at, levels, midpoint = fit.placed(cycle, f_s, b_s)
    low = float(mb.min())
    return {"job_id": str(job_id), "model": str(row["model"]).rsplit(":", 1)[-1], "family": str(row["family"]),
            "batch_size": int(row["batch_size"]), "optimizer": str(row["optimizer"]),
            "step_time": float(row["step_time"]),
            "measured": {"times": times, "mb": mb, "midpoint": float((mb.max() + mb.min()) / 2),
                         "collectives": [((c[3] - lo) / (hi - lo), (c[4] - lo) / (hi - lo)) for c in comm],
                         "share": burst / (burst + idle), "tail": float(tail_fraction(timelines))},
            "simulated": {"times": at[:-1], "mb": levels / 2**20 + low,
                          "midpoint": None if midpoint is None else float(midpoint / 2**20 + low),
                          "share": float(fit.burst_fraction(cycle, f_s, b_s)), "tail": float(tail)}}


def plot_jobs(curves: list, out: str) -> str:
    """One panel per job of :func:`job_curves`: the measured level (a step curve), the simulated
    one over the measured low, both midpoints, the collectives shaded and both tails marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(curves), 1, figsize=(11, 3.0 * len(curves)), squeeze=False)
    for ax, c in zip(axes[:, 0], curves):
        m, s = c["measured"], c["simulated"]
        for a, b in m["collectives"]:
            ax.axvspan(a, b, color="tab:orange", alpha=0.2, lw=0)
        ax.step(np.append(m["times"], 1.0), np.append(m["mb"], m["mb"][-1]), where="post", color="tab:blue",
                label=f"measured (above its midpoint {m['share']:.0%} of the step)")
        ax.step(np.append(s["times"], 1.0), np.append(s["mb"], s["mb"][-1]), where="post", color="tab:red",
                label=f"simulated ({s['share']:.0%})")
        ax.axhline(m["midpoint"], color="tab:blue", ls=":", lw=1)
        if s["midpoint"] is not None:
            ax.axhline(s["midpoint"], color="tab:red", ls=":", lw=1)
        if np.isfinite(m["tail"]):
            ax.axvline(1 - m["tail"], color="tab:blue", ls="--", lw=1)
        ax.axvline(1 - s["tail"], color="tab:red", ls="--", lw=1)
        ax.set_xlim(0, 1)
        ax.set_ylabel("MB")
        ax.set_title(f"{c['job_id']}: {c['model']}, batch {c['batch_size']}, {c['optimizer']}, step "
                     f"{c['step_time']:.3f} s (dotted: midpoints, dashed: where the tail starts, shaded: collectives)",
                     fontsize=9)
        ax.legend(fontsize=8, loc="lower center")
    axes[-1, 0].set_xlabel("share of the step (the first worker's middle measured iteration)")
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
