"""The configuration of every job of a dataset, one row per item and in its order.

Splits group jobs by it (:mod:`driple.inspector.splits`) and the tabular baselines read it
(:mod:`driple.inspector.baselines`). A job's *architecture* is its model and knobs (everything
that shapes the network: depth, width, sequence length, ...); batch size, optimizer, learning
rate and seed are not part of it, so the jobs of one architecture differ only in how it is
trained.

:func:`job_table` takes an :class:`~driple.inspector.dataset.InspectorDataset` (or a view of
one, ``dataset[idx]``) or a plain table with at least ``job_id``, ``family`` and either
``architecture`` or ``model`` + ``knobs``: the splits are tested on such hand-written tables.
"""
from __future__ import annotations

import json

import pandas as pd

from driple.errors import DripleError

COLUMNS = ("job_id", "model", "family", "knobs", "architecture", "batch_size", "optimizer")


def architecture_key(model: str, knobs) -> str:
    """``"<model> <knobs as sorted JSON>"``: equal for two jobs exactly when their networks are
    (``knobs`` a dict or its JSON text; empty or missing = no knobs)."""
    if isinstance(knobs, str):
        text = knobs.strip()
        try:
            knobs = json.loads(text) if text else {}
        except ValueError:
            raise DripleError(f"cannot read knobs {knobs!r}: they must be JSON") from None
    elif knobs is None or (isinstance(knobs, float) and knobs != knobs):  # None or NaN
        knobs = {}
    if not isinstance(knobs, dict):
        raise DripleError(f"knobs {knobs!r} must be a JSON object")
    return f"{model} {json.dumps(knobs, sort_keys=True)}"


def job_table(data) -> pd.DataFrame:
    """One row per job of ``data`` (a dataset or a table, see the module doc), in its order,
    with the columns of :data:`COLUMNS` that can be known (``architecture`` always)."""
    if isinstance(data, pd.DataFrame):
        table = data.reset_index(drop=True).copy()
    else:
        table = _from_dataset(data)
    missing = [c for c in ("job_id", "family") if c not in table]
    if "architecture" not in table:
        if "model" not in table:
            missing.append("architecture (or model)")
        else:
            knobs = table["knobs"] if "knobs" in table else [None] * len(table)
            table["architecture"] = [architecture_key(m, k) for m, k in zip(table["model"], knobs)]
    if missing:
        raise DripleError(f"a job table needs the column(s) {', '.join(missing)}")
    table["job_id"] = table["job_id"].astype(str)
    table["family"] = table["family"].astype(str)
    table["architecture"] = table["architecture"].astype(str)
    return table


def _from_dataset(dataset) -> pd.DataFrame:
    """The rows of ``dataset.frame`` (the results the dataset read) for its items, in order."""
    ids = [str(j) for j in dataset.job_ids]
    frame = dataset.frame.assign(job_id=dataset.frame["job_id"].astype(str)).set_index("job_id")
    absent = [j for j in ids if j not in frame.index]
    if absent:
        raise DripleError(f"{len(absent)} job(s) of the dataset are not in its results table "
                          f"(e.g. {absent[0]}); rebuild it")
    rows = frame.loc[ids]
    table = pd.DataFrame({
        "job_id": ids,
        "model": rows["model"].astype(str).to_numpy(),
        "family": [str(f) for f in dataset.families],
        "knobs": [json.dumps(_knobs(k), sort_keys=True) for k in rows["knobs"]],
        "batch_size": rows["batch_size"].astype(int).to_numpy(),
        "optimizer": rows["optimizer"].astype(str).to_numpy(),
    })
    table["architecture"] = [architecture_key(m, k) for m, k in zip(table["model"], table["knobs"])]
    return table


def _knobs(text) -> dict:
    key = architecture_key("", text)  # parses and checks
    return json.loads(key[1:])
