"""Draw a job's sampled series under its timeline runs, to see why a burst is a burst.

One column per rank, one row per resource. Each panel shows the sampler's 100 Hz series
(compute %, allocated / resident memory MB, TX / RX MB/s) and, shaded, the runs the timeline
labeller found: compute runs, communication in flight, and the time allocated memory stays
above its iteration's midpoint. The text gives the timeline labels (v2) and, for comparison,
the paper's k-means labels of the same window; iteration starts are ticks at the top and the
time outside the measurement window is greyed. By default the x-axis shows ``span`` seconds
from the middle of the window; ``span=0`` shows the whole run.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from driple.errors import DripleError
from driple.metrics import resource, resource_names


def resolve_run(run: str | os.PathLike, dataset: str | os.PathLike = ".") -> tuple[Path, Path | None]:
    """``(raw .npz, detail .json or None)`` of a job named by file, dataset directory or id."""
    p = Path(run)
    if p.is_dir():
        if (p / "results.csv").exists():  # a dataset: its last job that has a series
            from driple.collect.results import load_results

            df = load_results(p, history=True)
            df = df[df["raw_path"].notna()] if "raw_path" in df else df.iloc[0:0]
            if not len(df):
                raise DripleError(f"dataset {p} has no job with a raw series yet")
            p = p / str(df.iloc[-1]["raw_path"])
        else:  # a raw/ directory, or a dataset whose rows are not written (yet)
            npz = sorted([f for f in [*p.glob("*.npz"), *p.glob("raw/*.npz")] if not f.name.endswith(".timeline.npz")],
                         key=lambda f: f.stat().st_mtime)
            if not npz:
                raise DripleError(f"{p} holds neither results.csv nor raw .npz files")
            p = npz[-1]
    elif not p.exists():
        for cand in (Path(dataset) / "raw" / f"{run}.npz", Path(dataset) / f"{run}.npz"):
            if cand.exists():
                p = cand
                break
        else:
            raise DripleError(f"no job {str(run)!r}: not a file, a dataset directory, nor an id in {dataset}/raw/")
    if p.name.endswith(".timeline.npz"):
        p = p.with_name(p.name.removesuffix(".timeline.npz") + ".npz")
    if p.suffix == ".json":
        p = p.with_suffix(".npz")
    if not p.exists():
        raise DripleError(f"no raw series {p} (the job may have failed before sampling)")
    detail = p.with_suffix(".json")
    return p, detail if detail.exists() else None


def _shade(ax, runs_s, color, label):
    import numpy as np

    runs_s = np.asarray(runs_s, dtype=float).reshape(-1, 2)
    if len(runs_s):
        ax.broken_barh(list(zip(runs_s[:, 0], runs_s[:, 1] - runs_s[:, 0])), (0, 1), facecolors=color,
                       alpha=0.35, lw=0, transform=ax.get_xaxis_transform(), label=label)


def _fmt(v: float, unit: str) -> str:
    return f"{v * 1e3:.1f} ms" if unit == "s" else f"{v:.3g} {unit}"


def plot_job(run, out, dataset=".", targets=None, span: float = 1.0, start: float | None = None) -> Path:
    """Draw the job's series and timeline runs to ``out`` (png/pdf/svg); returns the path written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from driple.collect.series import read_raw
    from driple.collect.labels.timeline import MERGE_GAP_NS, comm_runs, iteration_spans, memory_burst_runs, union
    from driple.collect.timeline.record import load_job_timelines
    from driple.metrics import unit

    raw_path, detail_path = resolve_run(run, dataset)
    series = read_raw(raw_path)
    detail = json.loads(detail_path.read_text()) if detail_path else {}
    per_rank = detail.get("per_rank", {})
    tl_path = raw_path.with_name(raw_path.stem + ".timeline.npz")
    timelines = load_job_timelines(tl_path) if tl_path.exists() else {}
    net = comm_runs(timelines) if timelines else {}
    names = list(targets) if targets else [n for n in series.names if n.startswith("worker")] or series.names
    unknown = [n for n in names if n not in series.names]
    if unknown:
        raise DripleError(f"no rank {', '.join(unknown)} in this job; it has {', '.join(series.names)}")
    host_mb = float(series.meta.get("host_mem_bytes") or 0) / 1e6
    to_s = lambda ns: (np.asarray(ns, dtype=float) - series.start_ns) / 1e9  # noqa: E731

    fig, axes = plt.subplots(len(resource_names()), len(names), figsize=(5.5 * len(names) + 1, 9.5),
                             sharex=True, squeeze=False)
    for j, name in enumerate(names):
        df = series.rates(name)
        t = df.index.to_numpy(dtype=float)
        entry = per_rank.get(name, {})
        t0, t1 = entry.get("window_s") or ([t[0], t[-1]] if len(t) else [0.0, 1.0])
        if span and span > 0:
            lo = start if start is not None else max(t0, (t0 + t1) / 2 - span / 2)
            hi = lo + span
        else:
            lo, hi = (t[0], t[-1]) if len(t) else (0.0, 1.0)
        tl = timelines.get(name)
        runs = {}
        if tl is not None:
            runs["compute"] = to_s(union(tl.compute, MERGE_GAP_NS))
            runs["memory"] = to_s(memory_burst_runs(tl.mem, iteration_spans(tl.measured)))
            for d in ("tx", "rx"):
                runs[d] = to_s(union(net[name][d], MERGE_GAP_NS))
        starts = to_s(tl.iters[:, 0]) if tl is not None else []
        v2, km = entry.get("labels", {}), entry.get("kmeans", {})
        for i, res in enumerate(resource_names()):
            ax = axes[i][j]
            if res == "memory":
                rss = df["memory"].to_numpy(dtype=float) * host_mb / 100.0
                ax.plot(t, rss, lw=0.8, color="0.5", drawstyle="steps-pre", label="RSS (sampled)")
                if tl is not None and len(tl.mem):
                    ax.plot(to_s(tl.mem[:, 0]), tl.mem[:, 1] / 1e6, lw=0.8, color="tab:green",
                            drawstyle="steps-post", label="allocated (timeline)")
                v = rss
            else:
                v = df[res].to_numpy(dtype=float)
                ax.plot(t, v, lw=0.8, color="tab:blue", drawstyle="steps-pre", label="sampled (100 Hz)")
            _shade(ax, runs.get(res, []), "tab:orange", "timeline burst runs")
            if v2:
                text = "timeline: burst " + ", ".join(
                    _fmt(v2[f"{res}_{k}"], unit(f"{res}_{k}")) for k in ("burst_amount", "burst_duration")
                ) + f"; idle {_fmt(v2[f'{res}_idle_duration'], 's')}"
                if km:
                    text += "\nk-means: burst " + ", ".join(
                        _fmt(km[f"kmeans_{res}_{k}"], "s" if k != "burst_amount" else ("%" if res in ("compute", "memory") else "MB/s"))
                        for k in ("burst_amount", "burst_duration")) + f"; idle {_fmt(km[f'kmeans_{res}_idle_duration'], 's')}"
                ax.text(0.01, 0.87, text, transform=ax.transAxes, va="top", fontsize=7.5,
                        bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})
            for a, b in ((min(lo, t0) - 1, t0), (t1, max(hi, t1) + 1)):
                ax.axvspan(a, b, color="0.85", lw=0, zorder=0)
            ax.vlines(starts, 0.9, 1.0, color="k", lw=0.6, transform=ax.get_xaxis_transform())
            ax.set_xlim(lo, hi)
            if len(t):
                vis = (t >= lo) & (t <= hi) & np.isfinite(v)
                top = float(np.max(v[vis])) if vis.any() else 1.0
                if res == "memory" and tl is not None and len(tl.mem):
                    top = max(top, float(tl.mem[:, 1].max()) / 1e6)
                ax.set_ylim(0, top * 1.3 if top > 0 else 1.0)
            if j == 0:
                ax.set_ylabel(f"{resource(res).title} ({'MB' if res == 'memory' else resource(res).unit})")
            if i == 0:
                ax.set_title(name)
            if i == len(resource_names()) - 1:
                ax.set_xlabel("time since sampling started (s)")
    spec = detail.get("spec", {})
    fig.suptitle(
        f"{detail.get('job_id', raw_path.stem)}  {detail.get('setting', {}).get('id', '')}  "
        f"{spec.get('model', '')} bs={spec.get('batch_size')}  ({detail.get('status', '?')})\n"
        "orange: timeline burst runs (compute, data in flight, memory above its midpoint); "
        "grey: outside the measured window; ticks: iteration starts",
        fontsize=9,
    )
    handles, labels = [], []
    for row in axes:
        for h, lab in zip(*row[0].get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=7, ncol=1)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
