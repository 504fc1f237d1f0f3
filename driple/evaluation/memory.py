"""The memory simulator against measured labels: for the peak, one offset and scale fitted on
the training families, the held-out family predicted (leave one family out), per family and
overall; for the burst and idle durations, the simulated cycle (:mod:`driple.graph.memory_cycle`)
with its tail fitted on the other families, times the step time (as measured, and as the
inspector predicted it for the held-out family)."""
from __future__ import annotations

import numpy as np

from driple.errors import DripleError


def simulated_peaks(frame, progress: bool = False) -> np.ndarray:
    """Simulated peak MB (at the collector's sample points) of each row of a results table
    (``nan`` where a job cannot be traced)."""
    from tqdm import tqdm

    from driple.inspector.memory_estimator import simulated_peak

    cache: dict = {}
    rows = frame.to_dict("records")
    return np.array([simulated_peak(r, cache) for r in tqdm(rows, disable=not progress, unit="job", desc="simulating")],
                    dtype=np.float64)


def leave_family_out(frame, simulated: np.ndarray, target: str = "memory_burst_amount") -> dict:
    """Per held-out family: the offset and scale fitted on the other families' rows, and the
    MAPE on the family's rows; with the median and mean over all held-out rows."""
    from driple.graph.memory import fit_offset

    measured = frame[target].to_numpy(dtype=np.float64)
    families = frame["family"].astype(str).to_numpy()
    pred = np.full(len(frame), np.nan)
    folds = {}
    for fam in sorted(set(families)):
        test = families == fam
        offset, scale = fit_offset(simulated[~test], measured[~test])
        pred[test] = offset + scale * simulated[test]
        err = np.abs(pred[test] / measured[test] - 1)
        folds[fam] = {"jobs": int(test.sum()), "mape": float(100 * np.nanmean(err)),
                      "offset_mb": offset, "scale": scale}
    err = np.abs(pred / measured - 1)
    return {"target": target, "jobs": int(np.isfinite(err).sum()), "mape": float(100 * np.nanmean(err)),
            "median_ape": float(100 * np.nanmedian(err)),
            "signed_median": float(100 * np.nanmedian(pred / measured - 1)), "families": folds,
            "predicted": pred.tolist()}


def lofo_figures(lofo: dict) -> dict:
    """What a memory record keeps of :func:`leave_family_out`: the MAPE, the median and each
    family's MAPE."""
    return {"lofo_mape": lofo["mape"], "lofo_median": lofo["median_ape"],
            "families": {k: round(v["mape"], 2) for k, v in lofo["families"].items()}}


def fit_setting(setting: str, datasets_root: str, out_of_zoo: list | None = None, progress: bool = False,
                evaluation_dir: str | None = None, other_machines: list | None = None) -> dict:
    """The memory record of a shipped setting: the simulator's offset and scale fitted on its
    inspector's training jobs, the leave-one-family-out error on its whole dataset, the 90th
    percentile of those errors (the interval a prediction gets), and the error on out-of-zoo
    datasets of the setting with the training fit; under ``cycle``, the memory durations'
    tail fit and figures (:func:`cycle_durations`; the held-out step predictions from the
    evaluation in ``evaluation_dir`` where it has the setting's family split); under
    ``other_machines``, the same setting's rows measured on another machine, each scored on
    its own (:func:`other_machine`)."""
    import os

    from driple.graph.memory import fit_offset
    from driple.inspector.dataset import read_results
    from driple.predict.predictor import Predictor
    from driple.setting_datasets import SettingDatasets
    from driple.settings import parse_setting

    predictor = Predictor.load(setting)
    dataset = SettingDatasets.load(datasets_root).dataset_dir(setting)
    frame = read_results(f"{dataset}/results.csv", 10.0).reset_index(drop=True)
    simulated = simulated_peaks(frame, progress=progress)
    train_ids = set((predictor.inspector.info.get("split") or {}).get("train") or [])
    train = frame["job_id"].isin(train_ids).to_numpy() if train_ids else np.ones(len(frame), dtype=bool)
    measured = frame["memory_burst_amount"].to_numpy(dtype=np.float64)
    offset, scale = fit_offset(simulated[train], measured[train])
    lofo = leave_family_out(frame, simulated)
    rel = np.abs(np.asarray(lofo["predicted"]) / measured - 1)
    where = os.path.relpath(dataset)
    where = dataset if where.startswith("..") else where
    record = {"offset_mb": offset, "scale": scale, "fitted_on": f"{int(train.sum())} training jobs of {where}",
              "blas_buffers": True,  # the simulated peaks hold what the BLAS of each row's machine keeps
              **lofo_figures(lofo), "interval_rel": float(np.nanquantile(rel, 0.9))}
    if predictor.inspector.host is not None and "timeline_path" in frame:
        split = family_split(setting, evaluation_dir) if evaluation_dir else {}  # read once: megabytes
        try:  # the memory durations: a setting without timelines or an evaluation gets a note
            steps = held_out_steps(setting, split, datasets_root)
            rule = unseen_rule_held_out(setting, evaluation_dir) if evaluation_dir else {}
            record["cycle"] = cycle_durations(frame, simulated_cycles(frame, progress=progress),
                                              measured_tails(frame, dataset), predictor.inspector.host, train, steps,
                                              rule.get("steps"))
        except DripleError as err:
            record["cycle_not_fitted"] = str(err)
        network = network_held_out(split)
        if network and "cycle" in record:
            record["cycle"]["network_held_out"] = network
        if rule.get("durations") and "cycle" in record:
            record["cycle"]["unseen_rule_held_out"] = rule["durations"]
    strategy = parse_setting(setting).strategy
    for path in out_of_zoo or []:
        record.setdefault("out_of_zoo", {})[str(path)] = out_of_zoo_errors(path, offset, scale, strategy, progress)
    for machine in other_machines or []:
        record.setdefault("other_machines", {})[str(machine["dataset"])] = other_machine(
            machine["dataset"], predictor.inspector.host, strategy, machine.get("out_of_zoo", ()), progress,
            shipped_fit=(offset, scale))
    return record


def out_of_zoo_errors(path: str, offset: float, scale: float, strategy: str, progress: bool = False) -> dict:
    """The memory amount of an out-of-zoo dataset's jobs with a fit's ``offset`` and ``scale``,
    each job's library heap added (:func:`driple.graph.memory.library_heap_mb`; and without it)."""
    from driple.graph.memory import library_heap_mb
    from driple.inspector.dataset import job_config, read_results

    other = read_results(f"{path}/results.csv", 10.0).reset_index(drop=True)
    sim = simulated_peaks(other, progress=progress)
    heaps = np.array([library_heap_mb(c["model"], c["batch_size"], c["knobs"], strategy)
                      for c in map(job_config, other.to_dict("records"))])
    truth = other["memory_burst_amount"].to_numpy(dtype=np.float64)
    err = (offset + heaps + scale * sim) / truth - 1
    plain = (offset + scale * sim) / truth - 1
    return {"jobs": int(np.isfinite(err).sum()), "mape": float(100 * np.nanmean(np.abs(err))),
            "median_signed": float(100 * np.nanmedian(err)), "library_heap_mb_median": float(np.median(heaps)),
            "without_library_heap": {"mape": float(100 * np.nanmean(np.abs(plain))),
                                     "median_signed": float(100 * np.nanmedian(plain))}}


def other_machine(dataset_dir: str, fallback_host, strategy: str, out_of_zoo=(), progress: bool = False,
                  shipped_fit: tuple | None = None) -> dict:
    """A setting's rows measured on another machine, scored as on the shipped one: the memory
    amount leave one family out (offset and scale fitted on the other families of these rows),
    its out-of-zoo datasets with the fit on all of them (:func:`out_of_zoo_errors`), and the
    cycle's share and durations with the measured step (the tail fitted on the other families,
    at the rates its ``provenance.json`` records, else ``fallback_host``'s); with
    ``shipped_fit`` (offset, scale), the memory amount carried: the shipped machine's fit on
    these rows, each simulated with its own machine's BLAS buffers (``carried``)."""
    from driple.graph.memory import fit_offset
    from driple.hardware.rows import recorded_provenance
    from driple.inspector.dataset import read_results

    frame = read_results(f"{dataset_dir}/results.csv", 10.0).reset_index(drop=True)
    simulated = simulated_peaks(frame, progress=progress)
    lofo = leave_family_out(frame, simulated)
    host = recorded_provenance(dataset_dir)[0] or fallback_host
    record = {"jobs": lofo["jobs"], **lofo_figures(lofo)}
    if shipped_fit is not None:
        err = (shipped_fit[0] + shipped_fit[1] * simulated) / frame["memory_burst_amount"].to_numpy(dtype=np.float64) - 1
        record["carried"] = {"mape": float(100 * np.nanmean(np.abs(err))), "median_ape": float(100 * np.nanmedian(np.abs(err))),
                             "signed_median": float(100 * np.nanmedian(err))}
    if out_of_zoo:
        offset, scale = fit_offset(simulated, frame["memory_burst_amount"].to_numpy(dtype=np.float64))
        record["out_of_zoo"] = {str(p): out_of_zoo_errors(p, offset, scale, strategy, progress) for p in out_of_zoo}
    if host is not None and "timeline_path" in frame:
        cycle = cycle_durations(frame, simulated_cycles(frame, progress=progress), measured_tails(frame, dataset_dir),
                                host, np.ones(len(frame), dtype=bool))
        record["cycle"] = {k: cycle[k] for k in ("share_mae", "with_measured_step")}
    return record


def simulated_cycles(frame, progress: bool = False) -> list:
    """The :class:`~driple.graph.memory_cycle.MemoryCycle` of each row's job (None where it
    cannot be traced)."""
    from tqdm import tqdm

    from driple.graph.build import op_graph_for
    from driple.graph.memory_cycle import memory_cycle
    from driple.inspector.dataset import job_config
    from driple.settings import parse_setting
    from driple.zoo.workload import example_batch, load_workload

    out = []
    for row in tqdm(frame.to_dict("records"), disable=not progress, unit="job", desc="memory cycles"):
        c = job_config(row)
        try:  # traced on the meta device, with the setting's communication
            wl = load_workload(c["model"], c["batch_size"], c["knobs"], shapes_only=True)
            _graph, traced, setting, comm = op_graph_for(wl.model, example_batch(wl, c["batch_size"]), wl.loss_fn,
                                                         c["optimizer"], parse_setting(c["setting"]))
            out.append(memory_cycle(traced, setting.strategy, setting.workers, c["optimizer"], comm=comm))
        except DripleError:
            out.append(None)
    return out


def measured_tails(frame, dataset_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the measured share of the step after its backward pass
    (:func:`~driple.collect.labels.timeline.tail_fraction`) and inside its blocking collectives
    (:func:`~driple.collect.labels.timeline.comm_fraction`); NaN without a timeline."""
    import os

    from driple.collect.labels.timeline import comm_fraction, tail_fraction
    from driple.collect.timeline.record import load_job_timelines

    tails, comm = np.full(len(frame), np.nan), np.full(len(frame), np.nan)
    for i, path in enumerate(frame.get("timeline_path", [None] * len(frame))):
        if isinstance(path, str) and path and os.path.exists(os.path.join(dataset_dir, path)):
            try:
                timelines = load_job_timelines(os.path.join(dataset_dir, path))
                tails[i], comm[i] = tail_fraction(timelines), comm_fraction(timelines)
            except DripleError:
                pass
    return tails, comm


def cycle_durations(frame, cycles: list, measured: tuple, host, train, steps: dict | None = None,
                    rule_steps: dict | None = None) -> dict:
    """The memory burst and idle durations of the simulated cycle: the tail fit on the ``train``
    rows (what a registry entry carries), and leave one family out: each family's rows placed
    with the tail fitted on the other families, times the measured step time, and times the
    inspector's held-out step prediction where ``steps`` (``{job_id: s}``) has the job, and
    times the unseen-family rule's (``rule_steps``, nested: what a profile of a family the
    inspector never saw multiplies its share by).
    ``measured``: each row's measured tail and share in blocking collectives
    (:func:`measured_tails`)."""
    from driple.graph.memory_cycle import TailFit

    f_s, b_s = float(host.flops_per_s), float(host.memory_bytes_per_s)
    tails, comm = measured
    ok = np.array([c is not None for c in cycles]) & np.isfinite(tails)
    train = np.asarray(train, dtype=bool)

    def fitted(rows, fitted_on=""):
        return TailFit.fit([c for c, k in zip(cycles, rows) if k], tails[rows], f_s, b_s, fitted_on, comm[rows])

    fit = fitted(ok & train, f"{int((ok & train).sum())} training jobs with a measured tail")
    families = frame["family"].astype(str).to_numpy()
    burst = frame["memory_burst_duration"].to_numpy(dtype=np.float64)
    idle = frame["memory_idle_duration"].to_numpy(dtype=np.float64)
    measured_step = frame["step_time"].to_numpy(dtype=np.float64)
    share = np.full(len(frame), np.nan)
    for fam in sorted(set(families)):
        test = families == fam
        fold = fitted(ok & ~test)
        for i in np.flatnonzero(test):
            if cycles[i] is not None:
                share[i] = fold.burst_fraction(cycles[i], f_s, b_s)
    measured_share = burst / (burst + idle)

    def errors(step):
        eb, ei = np.abs(share * step / burst - 1), np.abs((1 - share) * step / idle - 1)
        return {"jobs": int(np.isfinite(eb + ei).sum()), "burst_mape": float(100 * np.nanmean(eb)),
                "idle_mape": float(100 * np.nanmean(ei)), "families": {
                    fam: {"burst_mape": round(float(100 * np.nanmean(eb[families == fam])), 2),
                          "idle_mape": round(float(100 * np.nanmean(ei[families == fam])), 2)}
                    for fam in sorted(set(families))}}

    record = {"tail": fit.to_dict(), "rates": {"flops_per_s": f_s, "bytes_per_s": b_s},
              "tail_measured_jobs": int(ok.sum()),
              "share_mae": float(np.nanmean(np.abs(share - measured_share))),
              "share_corr": float(np.corrcoef(share[np.isfinite(share)], measured_share[np.isfinite(share)])[0, 1]),
              "with_measured_step": errors(measured_step),
              # the 90th percentile of each share's held-out error: a profile's interval widening
              "share_rel": {"memory_burst_duration": float(np.nanquantile(np.abs(share / measured_share - 1), 0.9)),
                            "memory_idle_duration": float(np.nanquantile(
                                np.abs((1 - share) / (1 - measured_share) - 1), 0.9))}}
    ids = frame["job_id"].astype(str).to_numpy()
    for key, given in (("with_held_out_step", steps), ("with_unseen_rule_step", rule_steps)):
        if given:
            predicted = np.array([given.get(j, np.nan) for j in ids], dtype=np.float64)
            record[key] = {**errors(predicted), "step_mape": float(
                100 * np.nanmean(np.abs(predicted / measured_step - 1)))}
    return record


def unseen_rule_held_out(setting: str, evaluation_dir: str) -> dict:
    """What the unseen-family rule (``scripts/calibrate_unseen_families.py``, nested: each family
    with the modes chosen on the others) gave each held-out family's jobs, from the
    ``unseen_families.json`` beside the evaluation: ``{"steps": {job_id: s}, "durations":
    {"burst_mape", "idle_mape"}}`` (its own memory durations' MAPE); {} where it kept none."""
    import json
    import os

    path = os.path.join(evaluation_dir, "unseen_families.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            nested = ((json.load(f).get("settings") or {}).get(setting) or {}).get("nested") or {}
    except (OSError, ValueError) as err:
        raise DripleError(f"{path} is not readable ({err}); run scripts/calibrate_unseen_families.py again") from None
    steps, mape = (nested.get("per_job") or {}).get("step_time"), nested.get("mape") or {}
    if not steps:
        return {}
    out = {"steps": {str(k): float(v) for k, v in steps.items()}}
    if mape.get("memory_burst_duration") is not None and mape.get("memory_idle_duration") is not None:
        out["durations"] = {"burst_mape": float(mape["memory_burst_duration"]),
                            "idle_mape": float(mape["memory_idle_duration"])}
    return out


def held_out_steps(setting: str, split: dict, datasets_root: str, models_root=None) -> dict:
    """``{job_id: step time}`` the shipped inspector predicted for each job with its family held
    out: the evaluation's kept network predictions (``split``, the setting's family split of its
    ``accuracy.json``: :func:`family_split`) joined to each fold's roofline again
    (:func:`driple.evaluation.rejoin.shipped_rejoin`); empty when it kept none or the inspector
    has no roofline."""
    from driple.evaluation.rejoin import shipped_rejoin

    folds = split.get("network_predictions")
    if not folds:
        return {}
    try:
        dataset, predictions = shipped_rejoin(setting, folds, datasets_root, models_root)
    except DripleError:  # no roofline to join
        return {}
    j = list(dataset.target_names).index("step_time")
    out = {}
    for fold, predicted in zip(folds, predictions):
        out.update({job: float(row[j]) for job, row in zip(fold["test_job_ids"], predicted)})
    return out


def network_held_out(split: dict) -> dict | None:
    """The shipped inspector's own MAPE of the memory burst and idle durations on held-out
    families (``split``: :func:`family_split`), or None."""
    scores = (split.get("scores") or {}).get("inspector") or {}
    try:
        return {"burst_mape": float(scores["memory_burst_duration"]["mape"]),
                "idle_mape": float(scores["memory_idle_duration"]["mape"])}
    except (KeyError, TypeError):
        return None


def compared(cycle: dict) -> tuple:
    """``(the cycle's, the other's)`` memory-duration figures on held-out families that decide
    which a profile takes: a family the inspector never saw gets the unseen-family rule's step
    (:func:`unseen_rule_held_out`), so where the rule's figures exist it is the cycle times the
    rule's step against the rule's own durations; else the cycle times the inspector's held-out
    step against the inspector's own. (None, None) where neither pair is complete."""
    for mine, theirs in (("with_unseen_rule_step", "unseen_rule_held_out"), ("with_held_out_step", "network_held_out")):
        if cycle.get(mine) and cycle.get(theirs):
            return cycle[mine], cycle[theirs]
    return None, None


def cycle_wins(cycle: dict) -> bool:
    """Whether a setting's profiles take their memory durations from the simulated cycle: where
    it beat the other durations on held-out families (:func:`compared`), burst and idle both.
    (A parameter-server worker's level after its backward pass sits at its midpoint for most of
    the step, so its share flips on a few MB: the cycle does not place it, and its network
    keeps the durations.)"""
    held, other = compared(cycle)
    return bool(held and other and held["burst_mape"] <= other["burst_mape"]
                and held["idle_mape"] <= other["idle_mape"])


def family_split(setting: str, evaluation_dir: str) -> dict:
    """The family split of ``setting`` in the evaluation's ``accuracy.json`` ({} without one)."""
    import json
    import os

    path = os.path.join(evaluation_dir, "accuracy.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return ((json.load(f).get("settings") or {}).get(setting) or {}).get("family") or {}
