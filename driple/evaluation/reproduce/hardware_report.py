"""The machine sections of the report, from the figures files beside the sections' JSON:

- ``hardware/*.json`` (``driple hardware evaluate``; commands in ``hardware/README.md``):
  predictions carried to a machine no training row came from, per target, as trained, carried
  by the spec, and the best table model trained on the other machine's rows; the drift pairs;
- ``gpu/memory.json`` (``scripts/eval_gpu_memory.py``): the memory simulator on GPU rows.
"""
from __future__ import annotations

import json
import os

#: The leave-one-machine-out files, as ``(title, file)``.
MACHINE_PAIRS = (("Intel Xeon -> AMD EPYC", "ps-intel-to-amd.json"),
                 ("AMD EPYC -> Intel Xeon", "ps-amd-to-intel.json"))
DRIFT = (("normal speed", "lo-drift-normal.json"), ("one-core quota", "lo-drift-quota1.json"))
DRIFT_PAIRS = (("each row's probe", "lo-drift-pairs-row.json"), ("each run's median probe", "lo-drift-pairs-median.json"))


def _read(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _cell(record: dict | None, key: str) -> str:
    value = (record or {}).get(key) or {}
    return "-" if "mape" not in value else f"{value['mape']:.1f} %"


def report_machines(out_dir: str) -> list[str]:
    """Leave one machine out and the drift check, where ``<out_dir>/hardware/`` has them."""
    folder = os.path.join(out_dir, "hardware")
    pairs = [(title, _read(os.path.join(folder, name))) for title, name in MACHINE_PAIRS]
    pairs = [(t, d) for t, d in pairs if d]
    lines = []
    if pairs:
        lines += ["## Another machine: leave one machine out", "",
                  f"`driple hardware evaluate` on the {pairs[0][1]['setting']} rows of one CPU model with an inspector "
                  "whose rows are all from the other (hardware/README.md has the commands). MAPE per target: "
                  "as trained (no carrying), carried by the specs, and the best table model (gradient boosting "
                  "on graph-level numbers) trained on the other machine's rows.", ""]
        head = "| target | " + " | ".join(f"{t}: trained / carried / table" for t, _ in pairs) + " |"
        lines += [head, "|---|" + "---|" * len(pairs)]
        for target in pairs[0][1]["targets"]:
            cells = []
            for _, d in pairs:
                r = d["targets"].get(target) or {}
                cells.append(f"{_cell(r, 'trained')} / {_cell(r, 'carried')} / {_cell(r, 'table')}")
            lines.append(f"| {target} | " + " | ".join(cells) + " |")
        lines.append("")
    drift = [(t, _read(os.path.join(folder, name))) for t, name in DRIFT]
    drift = [(t, d) for t, d in drift if d]
    paired = [(t, _read(os.path.join(folder, name))) for t, name in DRIFT_PAIRS]
    paired = [(t, d) for t, d in paired if d]
    if drift:
        lines += ["## One host at two speeds (drift)", "",
                  f"The same {drift[0][1]['jobs']} {drift[0][1]['setting']} jobs measured as the host is and under a "
                  "one-core cgroup quota, predicted from each row's probed spec. Step time MAPE:", "",
                  "| run | as trained | carried by the row's spec |", "|---|---|---|"]
        for title, d in drift:
            r = d["targets"].get("step_time") or {}
            lines.append(f"| {title} | {_cell(r, 'trained')} | {_cell(r, 'carried')} |")
        lines.append("")
        if paired:
            lines += ["Paired per job, the predicted slow-down against the measured one:", "",
                      "| probe | ratio MAPE | within 5 % | median signed |", "|---|---|---|---|"]
            for title, d in paired:
                lines.append(f"| {title} | {d['ratio_mape']:.1f} % | {100 * d['ratio_within_5pct']:.0f} % of jobs "
                             f"| {d['ratio_median_signed']:+.1f} % |")
            lines.append("")
    return lines


def report_gpu_memory(out_dir: str) -> list[str]:
    """The memory simulator on GPU rows, nothing fitted (docs/memory.md, "On a GPU")."""
    record = _read(os.path.join(out_dir, "gpu", "memory.json"))
    sets = {k: v for k, v in (record or {}).items() if isinstance(v, dict) and "peak" in v}
    if not sets:
        return []
    stamp = (record or {}).get("provenance") or {}
    lines = ["## GPU memory: the simulator on GPU rows", "",
             f"`{stamp.get('command', 'python scripts/eval_gpu_memory.py --write')}` ({stamp.get('date', '?')}). "
             "The step's tensors plus two cuBLAS workspaces, nothing fitted to these rows; the rule was chosen "
             "looking at them (docs/memory.md).", "",
             "| dataset | GPUs | jobs | peak | peak at the CPU label's sample points | between steps |",
             "|---|---|---|---|---|---|"]
    for name, f in sets.items():
        cells = [f"{f[k]['mape']:.1f} % (max {f[k]['max_ape']:.1f} %)" for k in ("peak", "peak_at_sample_points", "low")]
        lines.append(f"| {name} | {', '.join(f['gpus'])} | {f['jobs']} | " + " | ".join(cells) + " |")
    return lines + [""]
