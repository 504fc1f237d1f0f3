"""One training job under every strategy: DDP, FSDP and parameter server side by side.

For each registered strategy (two workers; one server for a parameter server) on the network
asked for, the row holds what needs no learning, from the traced step of that strategy: the
simulated peak memory of one rank (:mod:`driple.graph.memory`) and the bytes a worker sends and
receives per step (its communication nodes); and, where an inspector of that setting ships,
its predicted step time and memory per rank (the memory label, peak allocated bytes per
iteration: the simulator with the setting's fitted offset and scale) with their intervals and
the machine they describe. A strategy without a shipped inspector on that network says so
instead of a step time.
"""
from __future__ import annotations

from typing import Any, Optional

from driple.errors import DripleError


def strategy_settings(network: str = "lo", device: str = "cpu", workers: int = 2) -> dict[str, str]:
    """``{strategy: setting id}`` of every registered strategy on ``network``: its shipped
    inspector's setting when one exists, else the id it would have."""
    from driple.predict.registry import list_settings
    from driple.settings import Setting, parse_setting
    from driple.strategies import get_strategy, strategy_names

    shipped = {}
    for entry in list_settings():
        try:
            s = parse_setting(entry["setting"])
        except DripleError:
            continue
        if s.network == network and s.device == device and s.synchronous and s.workers == workers:
            shipped.setdefault(s.strategy, s.id)
    out = {}
    for name in strategy_names():
        servers = 1 if get_strategy(name).servers else 0
        out[name] = shipped.get(name) or Setting(device=device, strategy=name, workers=workers,
                                                 servers=servers, network=network).id
    return out


def compare_strategies(model: str, batch_size: Optional[int] = None, optimizer: str = "sgd",
                       knobs: Optional[dict] = None, network: str = "lo",
                       hardware: Any = "trained") -> list[dict]:
    """One row per strategy (module docstring) for a zoo model or a ``module:function``."""
    from driple.graph.build import build_input
    from driple.predict.predictor import Predictor, load_job_workload
    from driple.predict.registry import list_settings
    from driple.zoo.workload import example_batch

    workload = load_job_workload(model, batch_size, knobs or {})
    batch = example_batch(workload, batch_size)
    shipped = {e["setting"] for e in list_settings()}
    rows = []
    for strategy, setting in strategy_settings(network).items():
        row = {"strategy": strategy, "setting": setting}
        try:
            data = build_input(workload.model, batch, loss_fn=workload.loss_fn, optimizer=optimizer,
                               strategy=setting)
        except DripleError as err:
            raise DripleError(f"{model} under {strategy}: {err}") from None
        s = data.summary
        row.update(memory_peak_mb=float(s["memory_peak_mb"]), memory_phase=s["memory_phase"],
                   memory_breakdown_mb=s["memory_breakdown_mb"],
                   tx_mb_per_step=float(s["graph_features"]["comm_tx_mb"]),
                   rx_mb_per_step=float(s["graph_features"]["comm_rx_mb"]))
        if setting in shipped:
            predictor = Predictor.load(setting, hardware=hardware)
            profile = predictor.predict_job(model, batch_size=batch_size, optimizer=optimizer, knobs=knobs)
            lo, hi = profile.intervals["step_time"]
            mlo, mhi = profile.intervals["memory_burst_amount"]
            row.update(step_time_s=float(profile.metrics["step_time"]), step_time_interval_s=[lo, hi],
                       memory_mb=float(profile.metrics["memory_burst_amount"]),
                       memory_interval_mb=[float(mlo), float(mhi)],
                       measured_on=((profile.hardware or {}).get("spec") or {}).get("cpu_model"))
        else:
            row.update(step_time_s=None, step_time_interval_s=None, memory_mb=None, memory_interval_mb=None,
                       measured_on=None, note=f"no shipped inspector for {setting}: memory and network only")
        rows.append(row)
    return rows


def verdicts(rows: list[dict]) -> dict:
    """Which strategy is fastest (among those with a step time), which holds the least memory
    per rank by the simulated peak (every strategy, the same accounting) and by the shipped
    inspectors' memory (``least_memory_predicted``: among the strategies with one; None when
    fewer than two have it); ``same_machine`` is False when the step times describe different
    machines (then "fastest" compares machines as much as strategies)."""
    timed = [r for r in rows if r.get("step_time_s") is not None]
    machines = {r.get("measured_on") for r in timed}
    predicted = [r for r in rows if r.get("memory_mb") is not None]
    return {"fastest": min(timed, key=lambda r: r["step_time_s"])["strategy"] if timed else None,
            "least_memory": min(rows, key=lambda r: r["memory_peak_mb"])["strategy"] if rows else None,
            "least_memory_predicted": (min(predicted, key=lambda r: r["memory_mb"])["strategy"]
                                       if len(predicted) > 1 else None),
            "same_machine": len(machines) <= 1}
