"""Draw a job's four resource series with the burst/idle split, to check it by eye.

One column per rank, one row per declared resource (compute %, memory %, TX MB/s, RX MB/s). Burst
samples are shaded, the k-means threshold is a dotted line and the burst amount a dashed one;
iteration starts are ticks at the top, and the time outside the measurement window (start-up,
warm-up, shutdown) is greyed. The labels are those of :mod:`driple.collect.labeller` on the
same window as the job's row. By default the x-axis shows ``span`` seconds from the middle of
the window, where single bursts are visible; ``span=0`` shows the whole run.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from driple.errors import DripleError
from driple.metrics import resources


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
            npz = sorted([*p.glob("*.npz"), *p.glob("raw/*.npz")], key=lambda f: f.stat().st_mtime)
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
    if p.suffix == ".json":
        p = p.with_suffix(".npz")
    if not p.exists():
        raise DripleError(f"no raw series {p} (the job may have failed before sampling)")
    detail = p.with_suffix(".json")
    return p, detail if detail.exists() else None


def plot_job(run, out, dataset=".", targets=None, span: float = 1.0, start: float | None = None) -> Path:
    """Draw the job's series to ``out`` (png/pdf/svg); returns the path written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from driple.collect.labeller import BurstIdleLabeller, sample_durations
    from driple.collect.series import read_raw

    raw_path, detail_path = resolve_run(run, dataset)
    series = read_raw(raw_path)
    detail = json.loads(detail_path.read_text()) if detail_path else {}
    per_rank = detail.get("per_rank", {})
    names = list(targets) if targets else [n for n in series.names if n.startswith("worker")] or series.names
    unknown = [n for n in names if n not in series.names]
    if unknown:
        raise DripleError(f"no rank {', '.join(unknown)} in this job; it has {', '.join(series.names)}")

    declared = resources()
    fig, axes = plt.subplots(len(declared), len(names), figsize=(5.5 * len(names) + 1, 9),
                             sharex=True, squeeze=False)
    for j, name in enumerate(names):
        df = series.rates(name)
        t = df.index.to_numpy(dtype=float)
        win = per_rank.get(name, {}).get("window_s") or ([t[0], t[-1]] if len(t) else [0.0, 1.0])
        t0, t1 = win
        if span and span > 0:
            lo = start if start is not None else max(t0, (t0 + t1) / 2 - span / 2)
            hi = lo + span
        else:
            lo, hi = (t[0], t[-1]) if len(t) else (0.0, 1.0)
        dt = sample_durations(t) if len(t) else np.zeros(0)
        keep = (t >= t0) & (t <= t1)
        starts = [(it[1] - series.start_ns) / 1e9 for it in detail.get("iterations_ns", {}).get(name, [])]
        for i, decl in enumerate(declared):
            res = decl.name
            ax = axes[i][j]
            v = df[res].to_numpy(dtype=float)
            ax.plot(t, v, lw=0.8, color="tab:blue", drawstyle="steps-pre")
            if keep.sum() >= 2 and np.isfinite(v[keep]).any():
                ok = keep & np.isfinite(v)
                lab = BurstIdleLabeller(random_state=0, min_gap=decl.min_gap).fit(v[ok], dt[ok])
                idx = np.flatnonzero(ok)[lab.labels_ == 1]  # sample i covers (t[i] - dt[i], t[i]]
                ax.broken_barh(list(zip(t[idx] - dt[idx], dt[idx])), (0, 1), facecolors="tab:orange",
                               alpha=0.35, lw=0, transform=ax.get_xaxis_transform(), label="burst")
                if np.isfinite(lab.threshold_):
                    ax.axhline(lab.threshold_, color="grey", ls=":", lw=0.8, label="threshold")
                ax.axhline(lab.burst_amount_, color="tab:red", ls="--", lw=0.8, label="burst amount")
                ax.text(0.01, 0.87,
                        f"burst {lab.burst_amount_:.3g} {decl.unit}, {lab.burst_duration_ * 1e3:.1f} ms; "
                        f"idle {lab.idle_duration_ * 1e3:.1f} ms",
                        transform=ax.transAxes, va="top", fontsize=8,
                        bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})
            for a, b in ((min(lo, t0) - 1, t0), (t1, max(hi, t1) + 1)):
                ax.axvspan(a, b, color="0.85", lw=0, zorder=0)
            ax.vlines(starts, 0.9, 1.0, color="k", lw=0.6, transform=ax.get_xaxis_transform())
            ax.set_xlim(lo, hi)
            if len(t):
                vis = (t >= lo) & (t <= hi) & np.isfinite(v)
                top = float(np.max(v[vis])) if vis.any() else 1.0
                ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
            if j == 0:
                ax.set_ylabel(decl.axis_label[series.meta["device"]])
            if i == 0:
                ax.set_title(name)
            if i == len(declared) - 1:
                ax.set_xlabel("time since sampling started (s)")
    spec = detail.get("spec", {})
    fig.suptitle(
        f"{detail.get('job_id', raw_path.stem)}  {detail.get('setting', {}).get('id', '')}  "
        f"{spec.get('model', '')} bs={spec.get('batch_size')}  ({detail.get('status', '?')})\n"
        "orange: burst samples; grey: outside the measurement window; ticks at the top: iteration starts",
        fontsize=10,
    )
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=8, ncol=1)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
