"""The inner leave-family-out: which configuration of the source inspector predicts a model of
a family it never trained on best, decided on its training and validation jobs only (each of
their families predicted by every candidate trained on the others, the roofline joined as
shipped). ``scripts/choose_configuration_lofo.py`` prints and saves it;
``scripts/ship_inspectors.py --select-by lofo`` ships its choice."""
from __future__ import annotations

INNER_FRACTIONS = (50 / 65, 15 / 65)  # train : validation as in the random split's 50 : 15


def _fold(job):
    """One candidate on one held-out family: ``(candidate, family, held positions, predictions)``."""
    import numpy as np
    import torch

    from dataclasses import replace

    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.estimators import GNNEstimator
    from driple.inspector.evaluate import own_jobs
    from driple.inspector.roofline_estimator import WithRoofline
    from driple.inspector.jobs import job_table
    from driple.inspector.splits import cut_groups
    from driple.inspector.train import TrainOptions, preset
    from driple.metrics import use_labels

    path, candidate, family, epochs, patience, seed, labels = job
    use_labels(labels)  # a spawned worker starts from the declared labels, not the live ones
    torch.set_num_threads(1)
    inspector = load_inspector(path)
    ds, split = own_jobs(inspector)
    inner = sorted(split.train + split.val)
    table = job_table(ds)
    fams, archs = table["family"].tolist(), table["architecture"].tolist()
    rest = [i for i in inner if fams[i] != family]
    held = [i for i in inner if fams[i] == family]
    train, val = ([rest[j] for j in part] for part in cut_groups([archs[i] for i in rest], INNER_FRACTIONS, seed))
    config, defaults = preset(candidate)
    options = replace(TrainOptions(epochs=epochs, patience=patience, seed=seed),
                      target_scaling=defaults.target_scaling, ema=defaults.ema)
    network = GNNEstimator(options=options, config=config, name=candidate)
    host = inspector.roofline.host if inspector.roofline is not None else inspector.host
    est = WithRoofline(network, host=host).fit(ds, train, val)
    return candidate, family, held, np.asarray(est.predict(ds, held), dtype=np.float64)


def inner_leave_family_out(path: str, candidates, epochs: int = 300, patience: int = 30,
                           seed: int = 0, processes: int = 2) -> dict:
    """``{candidate: {"median": %, "mean": %, "step_time": %, "mape": {target: %}}}`` plus job and
    family counts, on the train + validation jobs of the checkpoint at ``path``."""
    import multiprocessing as mp

    import numpy as np

    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.evaluate import own_jobs
    from driple.inspector.jobs import job_table
    from driple.inspector.scores import score_table, table_summary
    from driple.metrics import label_version

    inspector = load_inspector(path)
    ds, split = own_jobs(inspector)
    inner = sorted(split.train + split.val)
    fams = job_table(ds)["family"].tolist()
    families = sorted({fams[i] for i in inner})
    jobs = [(path, c, f, epochs, patience, seed, label_version()) for c in candidates for f in families]
    if processes > 1:
        with mp.get_context("spawn").Pool(processes) as pool:
            results = pool.map(_fold, jobs, chunksize=1)
            pool.close()
            pool.join()
    else:
        results = [_fold(j) for j in jobs]
    y = np.asarray(ds.targets, dtype=np.float64)
    names = list(ds.target_names)
    out = {"jobs": len(inner), "families": families}
    for c in candidates:
        rows, preds = [], []
        for cand, _, held, pred in results:
            if cand == c:
                rows += held
                preds.append(pred)
        table = score_table(y[rows], np.vstack(preds), names)  # the evaluation's own MAPE
        summary = table_summary(table)
        out[c] = {"median": summary["mape_median"], "mean": summary["mape_mean"],
                  "step_time": summary["step_time_mape"],
                  "mape": {n: table[n]["mape"] for n in names if table[n]["mape"] is not None}}
    out["chosen"] = min(candidates, key=lambda c: out[c]["median"])
    return out
