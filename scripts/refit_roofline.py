#!/usr/bin/env python
"""Fit the shipped inspectors' roofline again, as the current code fits it (e.g. with the overlap
of communication and compute, :func:`driple.inspector.roofline.fit_overlap`).

    python scripts/refit_roofline.py                          # every shipped inspector
    python scripts/refit_roofline.py --settings cpu-ddp-w2-1g --dry-run

The network and the tree member stay as they are. The roofline is fitted on the checkpoint's own
training jobs (its recorded split), each duration's mode chosen again on its validation jobs,
the intervals calibrated again on its calibration jobs (the joined predictions changed), and
the card, scores and registry entry written again. An inspector whose roofline comes out the
same (same rates, overlap and modes) is left untouched.

Its registry entry keeps the memory simulator's fit. A refitted inspector carries no
unseen-family calibration and no ``carried`` figures (those were of the old roofline):
run the evaluation (``python scripts/reproduce.py --sections accuracy ...``) and then
``python scripts/calibrate_unseen_families.py``.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

from driple.shipped import require_checkout

require_checkout(__file__)  # it writes this checkout's trained_models/, never another's
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def same_roofline(a, b) -> bool:
    """Whether two roofline members predict alike: rates, overlap and modes."""
    import numpy as np

    if a is None or b is None:
        return a is b
    return (a.modes == b.modes and a.overlap == b.overlap and a.weights.keys() == b.weights.keys()
            and all(np.allclose(a.weights[t], b.weights[t], rtol=1e-12, atol=0) for t in a.weights))


def previous_command(card: Path) -> str:
    """The command of the card's "Reproduce" block (how the inspector was trained)."""
    if not card.exists():
        return ""
    m = re.search(r"## Reproduce\s*\n\s*```\n(.*?)\n```", card.read_text(), re.S)
    return m.group(1).strip() if m else ""


def previous_trained_line(card: Path) -> str:
    """The card's "Trained <date> on <host>; versions ..." line (when the network was trained)."""
    if not card.exists():
        return ""
    return next((line for line in card.read_text().splitlines() if line.startswith("Trained ")), "")


def refit(setting: str, models_dir: Path, nominal: float, command: str, dry_run: bool) -> dict:
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.evaluate import own_jobs
    from driple.predict.registry import load_registry, resolve
    from driple.shipping.ship import calibrate, ship

    path, entry = resolve(setting, root=models_dir)
    inspector = load_inspector(str(path))
    if inspector.roofline is None:
        return {"setting": setting, "status": "no roofline (nothing to refit)"}
    ds, split = own_jobs(inspector)
    new = with_roofline(inspector, ds, split)
    old = inspector.roofline
    record = {"setting": setting, "overlap": new.roofline.overlap,
              "modes_changed": {t: [old.modes.get(t), m] for t, m in new.roofline.modes.items()
                                if old.modes.get(t) != m}}
    if same_roofline(old, new.roofline):
        return {**record, "status": "unchanged"}
    if dry_run:
        return {**record, "status": "would refit"}
    new.info.pop("unseen_family", None)  # calibrated on the old roofline's predictions
    cov = calibrate(new, ds, split, nominal)
    card = models_dir / setting / "MODEL_CARD.md"
    before, trained_line = previous_command(card), previous_trained_line(card)
    default = load_registry(models_dir).get("default") == setting
    shipped = ship(new, setting, description=entry.get("description", setting),
                   trained=entry.get("trained", "?"), command="\n".join(c for c in (before, command) if c),
                   root=models_dir, default=default, keep=kept_fields(entry))
    if trained_line:  # the network's training date stays; the card says when the roofline was refitted
        text = card.read_text().splitlines()
        now = next(i for i, line in enumerate(text) if line.startswith("Trained "))
        refitted = text[now].split(" on ", 1)[0].replace("Trained ", "")
        text[now] = f"{trained_line} Roofline fitted again {refitted}."
        card.write_text("\n".join(text) + "\n")  # the card is not in the checksum
    return {**record, "status": "refitted", "interval_coverage": cov.get("mean"),
            "test_mape_mean": shipped["scores"].get("test_mape_mean"), "sha256": shipped["sha256"]}


def kept_fields(entry: dict) -> dict:
    """What a refitted inspector's registry entry keeps of the old one: the memory simulator's fit
    (no roofline changes it; its cycle's held-out figures are renewed by ``fit_memory.py``). The
    unseen-family record and ``carried`` were of the old roofline's predictions and go."""
    return {k: entry[k] for k in ("memory",) if entry.get(k) is not None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"),
                   help="the shipped inspectors and their registry (default trained_models)")
    p.add_argument("--settings", nargs="*", default=None, help="only these settings (default: every shipped one)")
    p.add_argument("--coverage", type=float, default=0.9, help="nominal interval coverage (default 0.9)")
    p.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    a = p.parse_args(argv)
    from driple.errors import DripleError
    from driple.predict.registry import list_settings, no_inspector_message

    command = "python scripts/refit_roofline.py " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))
    os.chdir(ROOT)  # datasets are recorded relative to the repository
    try:
        models = Path(os.path.abspath(a.models_dir))
        settings = a.settings or sorted(e["setting"] for e in list_settings(models))
        if not settings:
            raise DripleError(no_inspector_message(models))
        for setting in settings:
            r = refit(setting, models, a.coverage, command.strip(), a.dry_run)
            alphas = ", ".join(f"{t} {v:g}" for t, v in r.get("overlap", {}).items()) or "none"
            modes = ", ".join(f"{t} {o}->{n}" for t, (o, n) in r.get("modes_changed", {}).items()) or "none"
            line = f"{setting}: {r['status']}; overlap {alphas}; modes changed: {modes}"
            if r["status"] == "refitted":
                line += (f"; test MAPE {r['test_mape_mean']:.1f} %, intervals cover {r['interval_coverage']:.1%}"
                         f" (sha256 {r['sha256'][:12]})")
            print(line, flush=True)
    except DripleError as err:
        print(f"refit_roofline: error: {err}", file=sys.stderr)
        return 2
    if not a.dry_run:
        print("then: python scripts/reproduce.py --sections accuracy,outofzoo,colocate,transfer, "
              "python scripts/calibrate_unseen_families.py", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
