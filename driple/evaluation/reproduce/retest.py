"""The ``retest`` section: test-retest difference per label, worker agreement and the noise
floor; the retest jobs measured in other sessions and on another CPU model.
"""
from __future__ import annotations

import os

from driple.evaluation.reproduce.context import Context, cpu_models_text, say, shown_path
from driple.evaluation.reproduce.labels import LABELLERS
from driple.evaluation.reproduce.tables import fixed


RETEST_TOLERANCE = 0.10  # median test-retest difference a label must stay within


def section_retest(ctx: Context) -> None:
    from driple.collect.results import load_results
    from driple.collect.retest import retest_table, worker_table
    from driple.inspector.dataset import dataset_label_version
    from driple.inspector.noise import noise_floor, other_session_dirs, retest_dir
    from driple.metrics import METRICS

    out = ctx.kept("retest", "settings")
    for setting in ctx.index.settings():
        first = ctx.dataset_dir(setting)
        again = retest_dir(first)
        if again is None or (ctx.args.settings and setting not in ctx.args.settings):
            continue
        entry = {"retest": again}
        v1 = dataset_label_version(load_results(first)) == "v1"  # its metric columns are k-means labels
        for labeller in (("timeline",) if v1 else LABELLERS):
            columns = [*METRICS, "step_time"] if labeller == "timeline" else [f"kmeans_{m}" for m in METRICS]
            table = retest_table(first, again, labeller)
            workers = worker_table(first, labeller)
            floor = noise_floor(first, again, columns)
            entry["v1" if v1 else labeller] = {"jobs": table["jobs"], "retest": table["labels"],
                               "workers": workers["labels"], "worker_jobs": workers["jobs"],
                               "floor": floor["labels"]}
            ok = [c for c, v in table["labels"].items() if v.get("n") and v["median_diff"] <= RETEST_TOLERANCE]
            say(f"retest {setting} ({'v1' if v1 else labeller}): {len(table['jobs'])} jobs; {len(ok)} of "
                 f"{len(table['labels'])} labels within {RETEST_TOLERANCE:.0%} median difference")
        entry["other_sessions"] = [  # the retest jobs measured on other days: the host's drift
            {"dataset": shown_path(run), "when": when_measured(run),
             **retest_table(first, run, "timeline", max_contention=10.0)} for run in other_session_dirs(first)]
        other = same_grid_elsewhere(ctx, setting)
        if other:  # the same jobs measured on another host: how far apart two CPU models are
            from driple.collect.retest import host_ratio_table

            entry["other_host"] = {"dataset": shown_path(other), "cpu_model": cpu_models_text(load_results(other)),
                                   **host_ratio_table(first, other)}
        out[setting] = entry
    ctx.save("retest", {"settings": out, "tolerance": RETEST_TOLERANCE})


def same_grid_elsewhere(ctx: Context, setting: str) -> str | None:
    """A dataset of ``setting`` in another collection than the indexed one (another host):
    ``<datasets-dir>/<collection>/<name>``."""
    mine = ctx.dataset_dir(setting)
    if not ctx.index.indexed:
        return None
    for collection in sorted(os.listdir(ctx.datasets)):
        path = os.path.join(ctx.datasets, collection, os.path.basename(mine))
        if os.path.abspath(path) != os.path.abspath(mine) and os.path.exists(os.path.join(path, "results.csv")):
            return path
    return None


RETEST_HEADINGS = {"timeline": "timeline labels (v2)", "kmeans": "k-means labels (beside v2)",
                   "v1": "labels v1 (k-means over the sampled window)"}


def report_retest(retest) -> list[str]:
    tol = retest.get("tolerance", RETEST_TOLERANCE)
    lines = ["## Test-retest and worker agreement", "",
             f"Median difference between two measurements of a job (durations judged against the "
             f"step: see `driple/collect/retest.py`), the share of jobs that agree, the two workers' "
             f"median difference, and the noise floor (NRMSE of predicting the retest by the first "
             f"measurement). ok: median difference <= {tol:.0%}.", ""]
    for setting, entry in retest["settings"].items():
        for labeller in (*LABELLERS, "v1"):
            if labeller not in entry:
                continue
            e = entry[labeller]
            lines += [f"### {setting}, {RETEST_HEADINGS[labeller]} ({len(e['jobs'])} jobs measured twice)", "",
                      "| label | retest median diff | agree | workers median diff | floor NRMSE | floor MAPE | ok |",
                      "|---|---|---|---|---|---|---|"]
            for label, v in e["retest"].items():
                if not v.get("n"):
                    continue
                w = e["workers"].get(label, {})
                fl = e["floor"].get(label, {})
                ok = "yes" if v["median_diff"] <= tol else "**no**"
                lines.append(f"| {label} | {fixed(100 * v['median_diff'], True)} | "
                             f"{fixed(100 * v['agree_share'], True)} | "
                             f"{fixed(100 * w['median_diff'], True) if w.get('n') else '-'} | "
                             f"{fixed(fl.get('nrmse'))} | {fixed(fl.get('mape'), True)} | {ok} |")
            lines.append("")
    for setting, entry in retest["settings"].items():
        lines += other_session_lines(setting, entry) + other_host_lines(setting, entry)
    return lines


def when_measured(dataset_dir: str) -> str:
    """The UTC span of a dataset's ok rows (``started``), e.g. ``2026-11-25 06:57-07:07 UTC``."""
    import pandas as pd

    from driple.collect.results import load_results

    table = load_results(dataset_dir)
    if "started" not in table.columns:
        return "?"
    started = pd.to_datetime(table.loc[table["status"] == "ok", "started"], utc=True, errors="coerce").dropna()
    if started.empty:
        return "?"
    first, last = started.min(), started.max()
    end = last.strftime("%H:%M") if first.date() == last.date() else last.strftime("%Y-%m-%d %H:%M")
    return f"{first.strftime('%Y-%m-%d %H:%M')}-{end} UTC"


def other_session_lines(setting: str, entry: dict) -> list[str]:
    """The dataset against its same-session retest and against the retest jobs measured in other
    sessions (``<dataset>-retest-<name>``): median difference per label."""
    runs = [r for r in entry.get("other_sessions") or [] if r.get("labels")]
    if not runs:
        return []
    same = (entry.get("timeline") or {}).get("retest") or {}
    lines = [f"### {setting}: the retest jobs in other sessions", "",
             "Median difference between the dataset and each measurement of its retest jobs: the "
             "retest of the same session, and runs of other sessions (quiet jobs only). Columns far "
             "above the first show a host that drifted between sessions, not a label that scatters.", "",
             "| label | same session | " + " | ".join(f"`{os.path.basename(r['dataset'])}` ({r['when']}, "
                                                     f"{len(r['jobs'])} jobs)" for r in runs) + " |",
             "|---" * (len(runs) + 2) + "|"]

    def pct(v: dict) -> str:
        return fixed(100 * v["median_diff"], True) if v.get("n") else "-"

    for label, v in same.items():
        if v.get("n"):
            lines.append(f"| {label} | {pct(v)} | " + " | ".join(pct(r["labels"].get(label, {})) for r in runs) + " |")
    return lines + [""]


def other_host_lines(setting: str, entry: dict) -> list[str]:
    """The same jobs measured on another host (CPU model): median ratio per label."""
    other = entry.get("other_host")
    if not other or not other.get("labels"):
        return []
    lines = [f"### {setting}: the same jobs on another host", "",
             f"{other['jobs']} jobs measured both in the shipped dataset and in "
             f"`{other['dataset']}` ({other.get('cpu_model') or '?'}). Median ratio shipped / "
             "other, with the middle half of the jobs: the hardware is part of the setting.", "",
             "| label | median ratio | 25-75 % |", "|---|---|---|"]
    lines += [f"| {label} | {v['median_ratio']:.2f} | {v['q25']:.2f}-{v['q75']:.2f} |"
              for label, v in other["labels"].items()]
    return lines + [""]
