"""Does a multi-node job give the labels of the one-host launcher? The same jobs measured both ways.

The bar is the retest rule (:mod:`driple.collect.retest`): a label agrees between the two
launchers when its median difference over the jobs is within the tolerance a job measured twice
by one launcher meets (10 %, durations judged against 2 % of the step). The setting's own
test-retest table is printed beside it, for how far one launcher repeats itself.
"""
from __future__ import annotations

from pathlib import Path

from driple.collect.retest import TOL, retest_table


def compare_launchers(one_host: str | Path, multi_node: str | Path, retest: tuple | None = None,
                      max_contention: float = 10.0) -> dict:
    """Per label: the multi-node rows against the one-host rows of the same jobs, and (``retest``:
    ``(first, again)`` dataset dirs) the one-host launcher against itself."""
    table = retest_table(one_host, multi_node, max_contention=max_contention)
    out = {"jobs": table["jobs"], "tolerance": TOL, "labels": table["labels"]}
    if retest is not None:
        out["retest"] = retest_table(*retest, max_contention=max_contention)["labels"]
    labels = out["labels"]
    out["within_tolerance"] = bool(labels) and all(s["median_diff"] <= TOL + 1e-12 for s in labels.values())
    return out


def format_comparison(result: dict) -> str:
    lines = [f"{len(result['jobs'])} jobs measured by both launchers; a label agrees when its median "
             f"difference is <= {result['tolerance']:.0%} (the retest rule)",
             f"{'label':<26}{'median diff':>12}{'jobs agree':>12}{'max rel':>10}{'retest median':>15}"]
    retest = result.get("retest", {})
    for label, s in result["labels"].items():
        ref = retest.get(label, {}).get("median_diff")
        lines.append(f"{label:<26}{s['median_diff']:>12.1%}{s['agree_share']:>12.0%}{s['max_rel_diff']:>10.1%}"
                     f"{'' if ref is None else format(ref, '.1%'):>15}")
    lines.append("every label within tolerance" if result["within_tolerance"] else
                 "NOT every label within tolerance")
    return "\n".join(lines)
