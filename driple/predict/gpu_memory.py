"""Does a job fit on a GPU, and what does: one CUDA worker's memory from the traced step.

A GPU worker's ``torch.cuda.memory_allocated`` is the step's tensors plus the cuBLAS workspaces
(:func:`driple.hardware.allocator.cuda_runtime_bytes`), so the memory simulator answers for a
GPU with nothing fitted: the whole step's peak (every op; on a GPU the label sees the peak
between the collector's sample points) and the level between steps. Measured on one-worker DDP
jobs of an H200 (``trained_models/evaluation/gpu/memory.json``); the report carries that error.
Not counted: the CUDA context (outside the allocator) and the caching allocator's fragmentation,
so a job predicted within a few per cent of the card's memory may still not fit.
"""
from __future__ import annotations

import json
from typing import Optional

from driple.errors import DripleError
from driple.hardware.spec import GpuSpec


def gpu_levels(traced, strategy: str, workers: int, compute_capability: str) -> dict:
    """Peak and between-steps level (MB) of one CUDA worker of ``strategy`` among ``workers``
    on a GPU of ``compute_capability`` for a traced step, with the peak's breakdown (the
    simulator's parts and the workspaces), and the peak at the CPU label's sample points
    (``sampled_peak_mb``: what the GPU label is compared against too)."""
    from driple.graph.memory import simulate_both, step_parts
    from driple.hardware.allocator import cuda_runtime_bytes

    parts = step_parts(traced, strategy, workers=workers)
    whole, sampled = simulate_both(traced, strategy, workers=workers, parts=parts)
    runtime = cuda_runtime_bytes(compute_capability) / 1e6
    between = (parts["params"] + parts["state"] + parts["batch"] + parts["grad_bytes"]) / 1e6
    breakdown = {**whole.to_dict()["breakdown_mb"], "cublas_workspaces": runtime}
    return {"peak_mb": whole.peak_mb + runtime, "between_steps_mb": between + runtime,
            "phase": whole.phase, "breakdown_mb": breakdown, "sampled_peak_mb": sampled.peak_mb + runtime}


def trace_job(model: str, batch_size: Optional[int], optimizer: str, knobs: dict):
    """``(traced step, batch size)`` of a zoo model or a user's ``module:function`` on the meta
    device; user-code failures as one-line errors."""
    from driple.graph.trace import trace_training_step
    from driple.predict.predictor import batch_len, load_job_batch

    workload, batch = load_job_batch(model, batch_size, knobs or {})
    traced = trace_training_step(workload.model, batch, workload.loss_fn, optimizer)
    return traced, int(batch_size or batch_len(batch) or 1)


def measured_error() -> Optional[dict]:
    """How far the rule was from measured GPU jobs (peak MAPE, jobs, GPUs), from the shipped
    evaluation; None when it is not there (an install without the evaluation files)."""
    from driple.predict.registry import models_dir

    path = models_dir() / "evaluation" / "gpu" / "memory.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    sets = {k: v for k, v in record.items() if isinstance(v, dict) and "peak" in v}
    if not sets:
        return None
    jobs = sum(v["jobs"] for v in sets.values())
    mape = sum(v["peak"]["mape"] * v["jobs"] for v in sets.values()) / jobs
    return {"peak_mape_pct": round(mape, 1), "jobs": jobs, "datasets": sorted(sets),
            "gpus": sorted({g for v in sets.values() for g in v.get("gpus", [])})}


def gpu_report(model: str, gpu: GpuSpec, batch_size: Optional[int] = None, optimizer: str = "sgd",
               knobs: Optional[dict] = None, strategy: str = "ddp", workers: int = 1,
               largest: bool = True) -> dict:
    """The answer of ``driple gpu-memory``: the job's levels on ``gpu``, whether the peak fits
    its memory and by how much it exceeds it, and (``largest``) the largest batch per worker
    whose simulated peak fits (:func:`driple.predict.fit_batch.largest_batch`)."""
    from driple.predict.fit_batch import largest_batch
    from driple.strategies import find_strategy

    if find_strategy(strategy) is None:
        from driple.strategies import strategy_names

        raise DripleError(f"unknown strategy {strategy!r}; known: {', '.join(strategy_names())}")
    if int(workers) < 1:
        raise DripleError(f"workers must be at least 1, not {workers}")
    if not gpu.memory_bytes:
        raise DripleError(f"the spec of {gpu.name} gives no memory size")
    traced, bs = trace_job(model, batch_size, optimizer, knobs or {})
    levels = gpu_levels(traced, strategy, int(workers), gpu.compute_capability)
    capacity = gpu.memory_bytes / 1e6
    report = {"model": model, "batch_size": bs, "optimizer": optimizer, "knobs": knobs or {},
              "strategy": strategy, "workers": int(workers), "gpu": gpu.name,
              "compute_capability": gpu.compute_capability, "capacity_mb": capacity, **levels,
              "fits": bool(levels["peak_mb"] <= capacity),
              "exceeds_by_mb": max(0.0, levels["peak_mb"] - capacity),
              "not_counted": "the CUDA context and the caching allocator's fragmentation",
              "caveat": "attention through F.scaled_dot_product_attention is counted as its math "
                        "(the sequence x sequence probabilities kept for backward); CUDA's fused "
                        "kernels keep none, so long sequences are over-predicted",
              "measured_error": measured_error()}
    if largest:
        def peak_mb(b: int) -> float:  # the search starts at the batch traced above
            if b == bs:
                return levels["peak_mb"]
            traced_b = trace_job(model, b, optimizer, knobs or {})[0]
            return gpu_levels(traced_b, strategy, int(workers), gpu.compute_capability)["peak_mb"]

        report["largest_batch"] = largest_batch(peak_mb, capacity, start=bs)
    return report


def pick_gpu(gpus, index: int = 0) -> GpuSpec:
    """GPU ``index`` of a spec's ``gpus``; a clear error where there are none (a CPU host's
    spec) or no GPU of that index."""
    gpus = list(gpus or [])
    if not gpus:
        raise DripleError("the hardware spec has no GPU: probe the GPU machine with "
                          "`driple hardware probe --json > gpu.json` and pass --gpu gpu.json")
    if not 0 <= index < len(gpus):
        raise DripleError(f"the spec has {len(gpus)} GPU(s); no GPU index {index}")
    return gpus[index]  # GpuSpec: a HardwareSpec and gpu_specs both make them
