"""Train the shipped inspectors from the shipped datasets and register them in trained_models/
(``scripts/ship_inspectors.py`` parses its options and calls :func:`ship_settings`).

The source setting's inspector is trained from scratch (or chosen among presets on validation or
on an inner leave-family-out); every target setting's is transferred from it with the paper's
scheme. Each gets split-conformal intervals, a model card and a checksum in the registry
(:mod:`driple.shipping.ship`).
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time

from driple.zoo.workload import checkout_root

ROOT = str(checkout_root())  # datasets are recorded relative to the checkout

DESCRIPTIONS = {
    "cpu-ddp-w2-lo": "DDP all-reduce (gloo), 2 CPU workers of one core each on one host, loopback.",
    "cpu-ddp-w2-1g": "DDP all-reduce (gloo), 2 CPU workers, each on an emulated host (network "
                     "namespace) joined by 1 Gbit/s links (tc tbf).",
    "cpu-ps-p1w2-1g": "Parameter server (torch.distributed.rpc over TCP), 1 server + 2 CPU "
                      "workers, synchronous, each on an emulated host with 1 Gbit/s links.",
    "cpu-fsdp-w2-lo": "FSDP (fully_shard, gloo), 2 CPU workers of one core each on one host, "
                      "loopback; one unit per indexed block, the rest the root unit.",
    "cpu-fsdp-w2-1g": "FSDP (fully_shard, gloo), 2 CPU workers, each on an emulated host (network "
                      "namespace) joined by 1 Gbit/s links (tc tbf); one unit per indexed block, the "
                      "rest the root unit.",
}

# how each transfer scheme of driple.inspector.transfer tunes the source, for the model card
TRANSFER_WORDS = {"paper": "paper scheme: first half of the K repetitions frozen",
                  "mlp": "fine-tuned whole: a features-only network is all MLP"}


def ship_settings(args, argv=None) -> int:
    """Ship the source and target inspectors as ``args`` (``scripts/ship_inspectors.py``'s
    options) say; ``argv``: the command line recorded in the cards. Exit status: 0, or 2 with
    the error printed."""
    args.argv = argv

    import torch

    from driple.errors import DripleError
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.splits import random_split
    from driple.inspector.train import TrainOptions
    from driple.inspector.transfer import default_scheme, finetune
    from driple.shipping.ship import calibrate, ship

    torch.set_num_threads(args.threads)
    command = "python scripts/ship_inspectors.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    options = TrainOptions(epochs=args.epochs, patience=args.patience,
                           target_scaling=args.target_scaling or "max", seed=args.seed)

    from driple.setting_datasets import SettingDatasets

    def load(setting):
        root = index.dataset_dir(setting)
        if not os.path.exists(os.path.join(root, "results.csv")):
            raise DripleError(f"no dataset for {setting} at {root}")
        return InspectorDataset(os.path.relpath(root, ROOT) if root.startswith(ROOT) else root,
                                groups=args.groups, grouping=args.grouping,
                                workers=args.build_workers)

    try:
        if args.select_by == "lofo" and (not args.select_models or not args.roofline or args.trees):
            raise DripleError("--select-by lofo chooses among the --select-models presets, each with the "
                              "roofline: give --select-models, and neither --no-roofline nor --trees")
        index = SettingDatasets.load(os.path.abspath(args.datasets))
        mixed = index.check_cpu_models()  # one CPU model per dataset, the one the index names
        if mixed:
            raise DripleError("the datasets do not match settings.json: " + "; ".join(mixed))
        os.chdir(ROOT)  # datasets are recorded relative to the repository
        t0 = time.perf_counter()
        if args.reuse_source:
            source = _shipped_source(args.source, index.dataset_dir(args.source), args.out)
            print(f"{args.source}: the shipped inspector, kept", flush=True)
        else:
            source, entry, cov = _ship_source(args, load, options, command)
            _report(args.source, entry, cov, time.perf_counter() - t0)

        if source.residual and options.target_scaling != "ln":  # residuals over priors: log space
            from dataclasses import replace

            options = replace(options, target_scaling="ln")
        scheme = default_scheme(source)
        for target in [t for t in args.targets.split(",") if t.strip()]:
            t0 = time.perf_counter()
            ds = load(target)
            tsplit = random_split(ds, seed=args.seed)
            tuned = finetune(source, ds, fraction=1.0, scheme=scheme, split=tsplit, options=options)
            if source.trees is not None:  # the source's trees read the source's setting: refit here
                from driple.inspector.ensemble import with_trees

                tuned = with_trees(tuned, ds, tsplit, random_state=args.seed)
            if source.roofline is not None:  # the target's own rates (its link, its host)
                from driple.inspector.ensemble import with_roofline

                tuned = with_roofline(tuned, ds, tsplit)
            cov = calibrate(tuned, ds, tsplit, args.coverage)
            entry = ship(tuned, target, description=DESCRIPTIONS.get(target, target),
                         trained=f"transferred from {args.source} ({TRANSFER_WORDS[scheme]}) "
                                 f"with {len(tsplit.train)} jobs of "
                                 f"{ds.root} (random split, seed {args.seed})",
                         command=command, root=args.out)
            _report(target, entry, cov, time.perf_counter() - t0)
    except DripleError as err:
        print(f"ship_inspectors: error: {err}", file=sys.stderr)
        return 2
    # the unseen-family intervals are of a checkpoint's configuration and training jobs: a new
    # checkpoint has none until its own leave-family-out evaluation calibrates them
    print("the new inspectors carry no unseen-family intervals yet: run python -m driple.evaluation "
          "--sections accuracy --write-shipped, then python scripts/calibrate_unseen_families.py", flush=True)
    return 0


def _ship_source(args, load, options, command):
    """Train the source inspector from scratch (graph-attribute variants side by side), ship it."""
    from driple.inspector.splits import random_split
    from driple.shipping.ship import calibrate, ship

    source_ds = load(args.source)
    split = random_split(source_ds, seed=args.seed)
    print(f"{args.source}: {len(source_ds)} jobs; train {len(split.train)}, val "
          f"{len(split.val)}, test {len(split.test)}", flush=True)
    if args.select_models:
        variants = [m.strip() for m in args.select_models.split(",") if m.strip()]
        by = "mape"
    elif args.select_graph_attr:
        variants, by = [("gnn", False), ("gnn", True)], "nrmse"
    else:
        variants, by = [(args.model, args.graph_attr)], "mape"
    variants = [v if isinstance(v, tuple) else (v, False) for v in variants]
    candidates = _train_variants(args, source_ds.root, variants, options)
    names = [f"{m}{'+graph_attr' if g else ''}" for m, g in variants]
    if args.trees:
        from driple.inspector.ensemble import with_trees

        candidates += [with_trees(c, source_ds, split, random_state=args.seed) for c in candidates]
        names += [f"{n}+trees" for n in names]
    if args.roofline:
        from driple.inspector.ensemble import with_roofline

        candidates += [with_roofline(c, source_ds, split) for c in candidates]
        names += [f"{n}+roofline" for n in names]
    for name, c in zip(names, candidates):
        print(f"  {name}: validation mean NRMSE {c.info['scores']['val']['mean']['nrmse']:.3f}, "
              f"MAPE {c.info['scores']['val']['mean']['mape']:.1f}%", flush=True)
    if args.select_by == "lofo":
        source = _select_by_lofo(args, [m for m, _ in variants], names, candidates)
    else:
        source = min(candidates, key=lambda c: c.info["scores"]["val"]["mean"][by])
        if len(candidates) > 1:
            source.info["selection"] = {
                "by": f"validation mean {by}", "chosen": names[candidates.index(source)],
                "candidates": {n: c.info["scores"]["val"]["mean"][by] for n, c in zip(names, candidates)}}
    cov = calibrate(source, source_ds, split, args.coverage)
    entry = ship(source, args.source, description=DESCRIPTIONS.get(args.source, args.source),
                 trained=f"from scratch on {len(split.train)} jobs of {source_ds.root} "
                         f"(random split, seed {args.seed})",
                 command=command, root=args.out, default=True)
    return source, entry, cov


def _select_by_lofo(args, presets, names, candidates):
    """The candidate (a preset with the roofline) the inner leave-family-out on the source's
    train + validation jobs chooses (:mod:`driple.inspector.family_choice`), recorded in it and
    in ``<out>/evaluation/configuration_lofo.json`` (which the source's model card shows)."""
    import tempfile

    from driple.collect.provenance import script_stamp
    from driple.inspector.family_choice import inner_leave_family_out

    roofed = {n: c for n, c in zip(names, candidates) if n.endswith("+roofline")}
    with tempfile.TemporaryDirectory() as tmp:  # any candidate: they share dataset, split and host
        path = next(iter(roofed.values())).save(tmp)
        print(f"  inner leave-family-out over {', '.join(presets)} on the train + validation jobs "
              f"({args.processes} processes) ...", flush=True)
        lofo = inner_leave_family_out(path, presets, args.epochs, args.patience, seed=args.seed,
                                      processes=args.processes)
    for m in presets:
        print(f"  {m}+roofline: held-out families' median MAPE {lofo[m]['median']:.1f}%, step time "
              f"{lofo[m]['step_time']:.1f}%", flush=True)
    source = roofed[f"{lofo['chosen']}+roofline"]
    source.info["selection"] = {
        "by": "inner leave-family-out on the train + validation jobs (median MAPE over the targets)",
        "chosen": f"{lofo['chosen']}+roofline",
        "candidates": {f"{m}+roofline": lofo[m]["median"] for m in presets},
        "validation_mape": {n: c.info["scores"]["val"]["mean"]["mape"] for n, c in roofed.items()}}
    out = os.path.join(args.out, "evaluation", "configuration_lofo.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"section": "configuration_lofo", "setting": args.source,
                   **script_stamp("ship_inspectors.py", args.argv), **lofo}, f, indent=1)
        f.write("\n")
    return source


def _shipped_source(setting, dataset, root):
    """The shipped source inspector; its training jobs' label range added if it has none."""
    from pathlib import Path

    import numpy as np

    from driple.collect.results import load_results
    from driple.inspector.checkpoint import load_inspector
    from driple.predict.registry import optional_fields, register, resolve

    path, entry = resolve(setting, root=Path(root))
    inspector = load_inspector(str(path))
    ts = inspector.target_scaler
    if ts.low_ is None:
        train = set((inspector.info.get("split") or {}).get("train", []))
        table = load_results(dataset).set_index("job_id")
        y = table.loc[sorted(train & set(table.index)), list(inspector.targets)].astype(float).to_numpy()
        ts.low_, ts.high_ = np.nanmin(y, axis=0).tolist(), np.nanmax(y, axis=0).tolist()
        saved = inspector.save(str(Path(path).parent))
        register(setting, saved, description=entry.get("description", setting),
                 trained=entry.get("trained", "?"), scores=entry.get("scores") or {},
                 card=entry.get("card"), default=True, root=Path(root),
                 **optional_fields(entry))
        card = Path(root) / setting / "MODEL_CARD.md"
        if card.exists():
            card.write_text(card.read_text() + f"\nLabel range of the {len(y)} training jobs added to "
                            f"the checkpoint on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
                            "(no retraining; used to clip and flag predictions).\n")
        print(f"{setting}: label range of {len(y)} training jobs recorded in {saved}", flush=True)
    return inspector


def _train_one(job):
    """One source training (runs in a worker process when variants are trained side by side)."""
    import torch

    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.splits import random_split
    from driple.inspector.train import train_inspector

    from dataclasses import replace

    from driple.inspector.train import preset

    root, builder, (name, graph_attr), hidden, repeats, options, ema, networks, threads, labels = job
    from driple.metrics import use_labels

    use_labels(labels)  # a spawned worker starts from the declared labels, not the live ones
    torch.set_num_threads(threads)
    ds = InspectorDataset(root, **builder, progress=False)
    split = random_split(ds, seed=options.seed)
    config, defaults = preset(name, hidden_channels=hidden, num_repeats=repeats, graph_attr=graph_attr)
    if networks is not None:
        config = replace(config, networks=networks)
    if options.target_scaling == "max" and defaults.target_scaling != "max":
        options = replace(options, target_scaling=defaults.target_scaling)  # the preset's scaling
    options = replace(options, ema=defaults.ema if ema is None else ema)
    model = train_inspector(ds[split.train], ds[split.val], options, config, test=ds[split.test],
                            progress=False)
    model.info["split"] = split.to_dict(ds)
    return model.state()


def _train_variants(args, root, variants, options):
    from driple.inspector.checkpoint import TrainedInspector

    from driple.metrics import label_version

    builder = {"groups": args.groups, "grouping": args.grouping}
    jobs = [(root, builder, v, args.hidden, args.repeats, options, args.ema, args.networks, args.threads,
             label_version())
            for v in variants]
    if len(jobs) == 1 or args.processes <= 1:
        states = [_train_one(j) for j in jobs]
    else:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(len(jobs)) as pool:
            states = pool.map(_train_one, jobs)
            pool.close()  # let the workers exit (the with block alone terminates them, and the
            pool.join()   # semaphores of their queues are then reported leaked at shutdown)
    return [TrainedInspector.from_state(s) for s in states]


def _report(setting, entry, cov, seconds):
    s = entry["scores"]
    print(f"{setting}: test NRMSE {s['test_nrmse_mean']:.3f}, MAPE {s['test_mape_mean']:.0f}% on "
          f"{s['n_test']} jobs; {cov['nominal']:.0%} intervals cover {cov.get('mean', float('nan')):.0%}"
          f" of test values; {seconds:.0f} s -> {entry['path']} (sha256 {entry['sha256'][:12]})",
          flush=True)

