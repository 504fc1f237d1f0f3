"""What a simulation is worth to a scheduler, in words, JSON and a JCT CDF plot.

The **share of the oracle's gain** that a policy recovers is ``(FIFO avg JCT - its avg JCT) /
(FIFO avg JCT - oracle avg JCT)``: 1 when it does as well as packing on measured profiles, 0
when it does no better than FIFO, negative when worse. It is not defined (None) when the oracle
gains less than ``MIN_GAIN`` of FIFO's average JCT: there is then no gain to recover.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

MIN_GAIN = 0.02  # of FIFO's average JCT: below it the share is a ratio of noise


def gain_share(fifo: dict, oracle: dict, policy: dict) -> float | None:
    """Share of the oracle's average-JCT gain over FIFO that ``policy`` recovers (summaries)."""
    gain = fifo["avg_jct_s"] - oracle["avg_jct_s"]
    if gain <= MIN_GAIN * fifo["avg_jct_s"]:
        return None
    return (fifo["avg_jct_s"] - policy["avg_jct_s"]) / gain


def summaries(results: dict) -> dict:
    """``{policy: summary}`` with ``oracle_gain_share`` added where FIFO and the oracle ran."""
    out = {name: res.summary() for name, res in results.items()}
    if "fifo" in out and "oracle" in out:
        for s in out.values():
            s["oracle_gain_share"] = gain_share(out["fifo"], out["oracle"], s)
    return out


def aggregate(tables: list) -> dict:
    """Mean over runs (seeds) of each policy's summary figures; violations summed over runs
    before their share is taken; the oracle gain share of the mean average JCTs."""
    out = {}
    for name in tables[0]:
        rows = [t[name] for t in tables if name in t]
        agg = {k: float(np.mean([r[k] for r in rows])) for k in
               ("avg_jct_s", "p99_jct_s", "makespan_s", "utilisation", "mean_slowdown")}
        agg.update(policy=name, runs=len(rows), jobs=rows[0]["jobs"], nodes=rows[0]["nodes"],
                   colocations=int(sum(r["colocations"] for r in rows)),
                   violations=int(sum(r["violations"] for r in rows)))
        agg["violation_share"] = agg["violations"] / agg["colocations"] if agg["colocations"] else 0.0
        out[name] = agg
    if "fifo" in out and "oracle" in out and "oracle_gain_share" in tables[0].get("fifo", {}):
        for agg in out.values():
            agg["oracle_gain_share"] = gain_share(out["fifo"], out["oracle"], agg)
    return out


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.2f} h")


def format_summaries(table: dict, header: str = "") -> str:
    """One line per policy: average and p99 JCT, makespan, utilisation, co-locations,
    violations, oracle gain share."""
    lines = [header] if header else []
    lines.append(f"{'policy':<8}{'avg JCT':>11}{'p99 JCT':>11}{'makespan':>11}{'util':>7}{'slowdown':>10}"
                 f"{'co-located':>12}{'violating':>16}{'oracle gain':>13}")
    for name, s in table.items():
        share = s.get("oracle_gain_share")
        share_txt = "-" if "oracle_gain_share" not in s else ("n/a" if share is None else f"{share:.0%}")
        viol = f"{s['violations']} ({s['violation_share']:.0%})" if s["colocations"] else "0"
        lines.append(f"{name:<8}{_duration(s['avg_jct_s']):>11}{_duration(s['p99_jct_s']):>11}"
                     f"{_duration(s['makespan_s']):>11}{s['utilisation']:>7.0%}{s['mean_slowdown']:>9.2f}x"
                     f"{s['colocations']:>12}{viol:>16}{share_txt:>13}")
    if any("oracle_gain_share" in s and s["oracle_gain_share"] is None for s in table.values()):
        lines.append(f"oracle gain n/a: packing on measured profiles gains less than {MIN_GAIN:.1%} of FIFO's "
                     "average JCT, so there is no gain to recover")
    lines.append("violating: co-locations out of memory or slowing a job by more than 1.15x (measured profiles, "
                 "interference model); util: measured compute work / compute capacity over the makespan")
    return "\n".join(lines)


def plot_jct_cdf(results: dict, path: str | Path, title: str = "") -> Path:
    """CDF of job completion times, one line per policy, into ``path`` (PNG, PDF, SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    styles = ("-", "--", "-.", ":")
    for k, (name, res) in enumerate(results.items()):
        jct = np.sort(res.jcts()) / 3600.0
        ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=name, linestyle=styles[k % len(styles)])
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("share of jobs")
    ax.set_title(title or "JCT CDF")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
