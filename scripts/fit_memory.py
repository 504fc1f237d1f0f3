"""Fit the memory simulator to each shipped setting and measure it (leave one family out,
out-of-zoo sets); ``--write`` puts the fit into the registry entries (``memory``) and the
figures into ``trained_models/evaluation/memory.json``.

    python scripts/fit_memory.py            # print only
    python scripts/fit_memory.py --write    # the shipped files it came from
    python scripts/fit_memory.py --write --settings cpu-fsdp-w2-lo --figures trained_models/evaluation/fsdp/memory.json

``--settings`` fits and writes only those settings' entries; the figures file keeps the records
of the settings not refitted.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_OF_ZOO = {"cpu-ddp-w2-lo": ["datasets/out-of-zoo"],
              "cpu-ps-p1w2-1g": ["datasets/v2-intel/out-of-zoo-cpu-ps-p1w2-1g"],
              "cpu-fsdp-w2-lo": ["datasets/v2/out-of-zoo-cpu-fsdp-w2-lo"],
              "cpu-fsdp-w2-1g": ["datasets/v2/out-of-zoo-cpu-fsdp-w2-1g"]}
OTHER_MACHINES = {"cpu-ps-p1w2-1g": [{"dataset": "datasets/v2/cpu-ps-p1w2-1g",  # its rows on the AMD EPYC host
                                       "out_of_zoo": ["datasets/v2/out-of-zoo-cpu-ps-p1w2-1g"]}]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write the registry entries and the evaluation file")
    ap.add_argument("--datasets", default="datasets")
    ap.add_argument("--settings", nargs="+", default=None, metavar="SETTING",
                    help="only these shipped settings (default: every one)")
    ap.add_argument("--figures", default=None, metavar="FILE",
                    help="where --write puts the figures (default trained_models/evaluation/memory.json)")
    ap.add_argument("--evaluation", default=None, metavar="DIR",
                    help="the evaluation whose held-out-family step predictions the memory durations "
                         "are scored with (its accuracy.json; default: the directory of --figures)")
    args = ap.parse_args(argv)
    from driple.collect.provenance import script_stamp
    from driple.evaluation.memory import fit_setting
    from driple.predict.registry import list_settings, models_dir, set_entry_field

    shipped = [e["setting"] for e in list_settings()]
    unknown = sorted(set(args.settings or ()) - set(shipped))
    if unknown:
        print(f"fit_memory: not shipped: {', '.join(unknown)} (shipped: {', '.join(shipped)})", file=sys.stderr)
        return 2
    records = {}
    for s in shipped:
        if args.settings and s not in args.settings:
            continue
        ooz = OUT_OF_ZOO.get(s, [])  # relative to the checkout: run from its root
        evaluation = args.evaluation or str(Path(args.figures).parent if args.figures else models_dir() / "evaluation")
        records[s] = fit_setting(s, args.datasets, out_of_zoo=ooz, progress=True, evaluation_dir=evaluation,
                                 other_machines=OTHER_MACHINES.get(s, []))
        r = records[s]
        print(f"{s}: offset {r['offset_mb']:.1f} MB, scale {r['scale']:.3f}; held-out families MAPE "
              f"{r['lofo_mape']:.2f} % (median {r['lofo_median']:.2f} %), 90 % of errors within "
              f"{100 * r['interval_rel']:.1f} %" + out_of_zoo_text(r))
        for path, o in r.get("other_machines", {}).items():
            c = o.get("cycle") or {}
            carried = o.get("carried")
            print(f"  on another machine ({path}, {o['jobs']} jobs): held-out families MAPE {o['lofo_mape']:.2f} %"
                  + (f"; with this machine's fit {carried['mape']:.2f} % (median signed {carried['signed_median']:+.2f} %)"
                     if carried else "")
                  + (f"; share MAE {c['share_mae']:.3f}, with the measured step burst "
                     f"{c['with_measured_step']['burst_mape']:.1f} % idle {c['with_measured_step']['idle_mape']:.1f} %" if c else "")
                  + out_of_zoo_text(o))
        if r.get("cycle_not_fitted"):
            print(f"  memory durations: no cycle fitted ({r['cycle_not_fitted']}); profiles keep the inspector's")
        cycle = r.get("cycle")
        if cycle:
            held = cycle.get("with_held_out_step")
            print(f"  memory durations, held-out families: share MAE {cycle['share_mae']:.3f}; with the measured "
                  f"step burst {cycle['with_measured_step']['burst_mape']:.1f} % idle "
                  f"{cycle['with_measured_step']['idle_mape']:.1f} %" + (
                      f"; with the inspector's held-out step ({held['step_mape']:.1f} %) burst "
                      f"{held['burst_mape']:.1f} % idle {held['idle_mape']:.1f} %" if held else
                      f" (no held-out step predictions in {evaluation})"))
            rule, rule_own = cycle.get("with_unseen_rule_step"), cycle.get("unseen_rule_held_out")
            if rule:
                print(f"  with the unseen-family rule's step ({rule['step_mape']:.1f} %, nested: what a family "
                      f"never trained on gets) burst {rule['burst_mape']:.1f} % idle {rule['idle_mape']:.1f} %"
                      + (f"; the rule's own durations {rule_own['burst_mape']:.1f} % / {rule_own['idle_mape']:.1f} %"
                         if rule_own else ""))
            network = cycle.get("network_held_out")
            if network:
                print(f"  the inspector's own on the same families: burst {network['burst_mape']:.1f} % idle "
                      f"{network['idle_mape']:.1f} %: profiles take the "
                      + ("cycle's" if cycle_entry(r) else "inspector's"))
    if args.write:
        root = models_dir()
        set_entry_field("memory", {s: {**{k: v for k, v in r.items() if k in (
            "offset_mb", "scale", "fitted_on", "lofo_mape", "interval_rel", "blas_buffers")}, **cycle_entry(r)}
            for s, r in records.items()}, root)
        figures = Path(args.figures) if args.figures else root / "evaluation" / "memory.json"
        kept = {}
        if args.settings and figures.exists():  # the settings not refitted keep their records
            kept = {k: v for k, v in json.loads(figures.read_text()).get("settings", {}).items()
                    if k not in records}
        figures.parent.mkdir(parents=True, exist_ok=True)
        figures.write_text(json.dumps({"section": "memory", **script_stamp("fit_memory.py", argv),
                                       "settings": {**kept, **records}}, indent=2) + "\n")
        print(f"wrote {root / 'registry.json'} and {figures}")
    return 0


def out_of_zoo_text(record: dict) -> str:
    """``; <set>: MAPE % (median signed %)`` for each out-of-zoo set of a memory record."""
    return "".join(f"; {Path(k).name}: {v['mape']:.1f} % ({v['median_signed']:+.1f} %)"
                   for k, v in record.get("out_of_zoo", {}).items())


def cycle_entry(record: dict) -> dict:
    """What a registry entry keeps of the memory durations' fit, where the cycle beat the
    inspector's own durations on held-out families (:func:`driple.evaluation.memory.cycle_wins`):
    the tail fit, the rates it was fitted at, the share's errors and its held-out-family errors
    with the step they were judged with (:func:`driple.evaluation.memory.compared`)."""
    from driple.evaluation.memory import compared, cycle_wins

    cycle = record.get("cycle")
    if not cycle or not cycle_wins(cycle):
        return {}
    held = compared(cycle)[0]
    return {"cycle": {"tail": cycle["tail"], "rates": cycle["rates"], "share_rel": cycle["share_rel"],
                      "held_out": {k: held[k] for k in ("burst_mape", "idle_mape", "jobs")}, "step": "predicted"}}


if __name__ == "__main__":
    sys.exit(main())
