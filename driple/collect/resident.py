"""What a worker process holds in memory beside its tensors: RSS minus the memory label.

The memory label (labels v2) is the peak of the bytes the allocator holds during an iteration.
A host's memory is taken by the process's resident set, which also holds the runtime (the
Python interpreter, torch's libraries, the communication library's buffers): a few hundred MB
that hardly depend on the model. Co-location on a host adds resident sets, so it needs that
part too (:func:`driple.predict.colocate.colocate` adds it to each job's memory).

Per job, from its raw series: the median RSS of each worker over the second half of the
measurement minus the job's ``memory_burst_amount``; per dataset the median over its jobs. On
this project's CPU hosts: ~210 MB per worker (parameter server, Intel Xeon) and ~250 MB (DDP
at 1 Gbit/s, AMD EPYC), with RSS = label + that constant within a median 4-8 % (172 and 152 jobs).
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np


def job_resident_mb(raw_path: str, memory_label_mb: float) -> Optional[float]:
    """Median over the workers of (median RSS over the measurement's second half) - the label,
    MB; None when the raw file is unreadable or holds no worker RSS series."""
    from driple.collect.series import read_raw
    from driple.errors import DripleError

    try:
        raw = read_raw(raw_path)
    except DripleError:
        return None
    series = [raw.arrays[f"{n}/rss_bytes"] for n in raw.names
              if n.startswith("worker") and f"{n}/rss_bytes" in raw.arrays]
    medians = [float(np.median(s[len(s) // 2:])) / 1e6 for s in series if len(s) >= 2]
    if not medians:
        return None
    return float(np.median(medians)) - float(memory_label_mb)


def resident_memory_mb(dataset_dir: str, jobs: Optional[Sequence[str]] = None) -> Optional[dict]:
    """``{"memory": MB, "jobs": n, "q25", "q75", "median_rel_err", "how"}``: the dataset's
    median resident part
    over its ok jobs (``jobs``: only these ids, e.g. an inspector's training jobs); None when
    no job has RSS series or a memory label in MB."""
    from driple.collect.results import load_results
    from driple.metrics import resource

    if resource("memory").amount != "MB":  # labels v1: memory in % of the host
        return None
    table = load_results(dataset_dir)
    table = table[table["status"].astype(str) == "ok"]
    if table["setting"].astype(str).str.startswith("gpu").any():
        return None  # a GPU's memory label is device memory: the host's RSS is another resource
    if jobs is not None:
        table = table[table["job_id"].isin(list(jobs))]
    values, rss = [], []
    for _, row in table.iterrows():
        raw = row.get("raw_path")
        if not isinstance(raw, str) or not raw or not np.isfinite(float(row["memory_burst_amount"])):
            continue
        v = job_resident_mb(os.path.join(dataset_dir, raw), float(row["memory_burst_amount"]))
        if v is not None:
            values.append(v)
            rss.append(v + float(row["memory_burst_amount"]))
    if not values:
        return None
    q25, q50, q75 = np.quantile(values, [0.25, 0.5, 0.75])
    # how well "RSS = label + this constant" describes the jobs: median relative error
    fit = float(np.median(np.abs(np.asarray(values) - q50) / np.maximum(np.asarray(rss), 1e-9)))
    return {"memory": float(q50), "jobs": len(values), "q25": float(q25), "q75": float(q75),
            "median_rel_err": fit,
            "how": "median over the jobs of a worker's median RSS (second half of the measurement) "
                   "minus its memory_burst_amount (driple.collect.resident)"}
