"""The stored timeline of one rank, and of a job (``raw/<job_id>.timeline.npz``).

A :class:`RankTimeline` holds plain int64 arrays, all times in ns of CLOCK_MONOTONIC (the
clock the workers log with and the sampler reads; network namespaces on one host share it):

- ``iters`` ``[n, 2]``: start, end of every iteration (warm-up included; the first ``warmup``
  are warm-up). A parameter server has *rounds* instead: one per release of its shard.
- ``compute`` ``[m, 2]``: intervals in which the rank's device computes (measured part only).
- ``comm`` ``[k, 7]``: ``iteration, peer, kind, start, end, tx_bytes, rx_bytes`` of every
  communication (:data:`COMM_KINDS`); ``peer`` is -1 for a collective, else the rank it talks to.
- ``serve`` ``[s, 4]`` (servers): ``worker, seq, entry, release`` — when the server had a
  worker's push in hand and when it released the answer.
- ``mem`` ``[p, 2]``: ``t, allocated bytes`` samples (consecutive equal values dropped).

On disk the allocated-bytes samples, by far the largest array (one sample per module call and
gradient: ~20 k per rank for a ResNet window), are stored losslessly as byte-shuffled deltas
(``<rank>/mem@delta``: half the size of the plain array under zlib); everything else as is.

``meta`` is a JSON-able dict: ``name``, ``role``, ``warmup``, ``device``, ``source`` (how the
intervals were recorded), ``memory_reader``, ``schedstat`` (CPU and run-queue wait of the
rank's threads over the measured window, ns), ``batch_size``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from driple.errors import DripleError

FORMAT = "driple-timeline-1"
COMM_KINDS = {"allreduce": 0, "broadcast": 1, "pushpull": 2, "allgather": 3, "reducescatter": 4}
COMM_COLUMNS = ("iteration", "peer", "kind", "start", "end", "tx_bytes", "rx_bytes")
SERVE_COLUMNS = ("worker", "seq", "entry", "release")
_SHAPES = {"iters": 2, "compute": 2, "comm": len(COMM_COLUMNS), "serve": len(SERVE_COLUMNS), "mem": 2}


def _empty(width: int) -> np.ndarray:
    return np.zeros((0, width), dtype=np.int64)


@dataclass
class RankTimeline:
    """What one rank did, when (see module docstring for the arrays and their units)."""

    meta: dict
    iters: np.ndarray = field(default_factory=lambda: _empty(2))
    compute: np.ndarray = field(default_factory=lambda: _empty(2))
    comm: np.ndarray = field(default_factory=lambda: _empty(len(COMM_COLUMNS)))
    serve: np.ndarray = field(default_factory=lambda: _empty(len(SERVE_COLUMNS)))
    mem: np.ndarray = field(default_factory=lambda: _empty(2))

    def __post_init__(self) -> None:
        for key, width in _SHAPES.items():
            arr = np.asarray(getattr(self, key), dtype=np.int64)
            if arr.size == 0:
                arr = _empty(width)
            if arr.ndim != 2 or arr.shape[1] != width:
                raise DripleError(f"timeline of {self.name!r}: '{key}' has shape {arr.shape}, "
                                  f"expected (n, {width})")
            setattr(self, key, arr)

    @property
    def name(self) -> str:
        return str(self.meta.get("name", "?"))

    @property
    def warmup(self) -> int:
        return int(self.meta.get("warmup", 0))

    @property
    def measured(self) -> np.ndarray:
        """``[n, 2]`` start, end of the measured (post-warm-up) iterations."""
        return self.iters[self.warmup:]

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in _SHAPES}


def _pack(arr: np.ndarray) -> np.ndarray:
    """``[n, w]`` int64 -> uint8 ``[w, 8, n]``: per column, deltas down the rows, bytes shuffled
    (the high bytes of small deltas are zeros that zlib then removes)."""
    deltas = np.diff(arr, axis=0, prepend=np.zeros((1, arr.shape[1]), dtype=np.int64))
    return np.ascontiguousarray(deltas.T).view(np.uint8).reshape(arr.shape[1], -1, 8).transpose(0, 2, 1).copy()


def _unpack(packed: np.ndarray) -> np.ndarray:
    width = packed.shape[0]
    deltas = np.ascontiguousarray(packed.transpose(0, 2, 1)).view(np.int64).reshape(width, -1).T
    return np.cumsum(deltas, axis=0, dtype=np.int64)


def save_job_timelines(path: str | Path, timelines: dict[str, RankTimeline]) -> Path:
    """Write every rank's timeline into one compressed ``.npz`` (atomic rename)."""
    path = Path(path)
    arrays = {"meta": np.array(json.dumps({"format": FORMAT,
                                           "ranks": {n: t.meta for n, t in timelines.items()}}))}
    for name, tl in timelines.items():
        for key, arr in tl.arrays().items():
            if key == "mem":
                arrays[f"{name}/mem@delta"] = _pack(arr)
            else:
                arrays[f"{name}/{key}"] = arr
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)
    return path


def load_job_timelines(path: str | Path) -> dict[str, RankTimeline]:
    """Read :func:`save_job_timelines` output; a one-line :class:`DripleError` when damaged."""
    path = Path(path)
    if not path.exists():
        raise DripleError(f"no timeline at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        meta = json.loads(str(arrays.pop("meta")))
    except Exception as exc:  # noqa: BLE001 - zip, zlib, JSON or numpy: the file is damaged
        raise DripleError(f"{path} is not a readable timeline ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DripleError(f"{path} is not a driple timeline (format {meta.get('format') if isinstance(meta, dict) else None!r})")
    out = {}
    for name, rank_meta in meta.get("ranks", {}).items():
        parts = {k: arrays.get(f"{name}/{k}", _empty(w)) for k, w in _SHAPES.items()}
        if f"{name}/mem@delta" in arrays:
            try:
                parts["mem"] = _unpack(arrays[f"{name}/mem@delta"])
            except ValueError as exc:
                raise DripleError(f"{path} is not a readable timeline (memory samples: {exc})") from None
        out[name] = RankTimeline(rank_meta, **parts)
    return out


def read_rank_file(path: str | Path) -> RankTimeline:
    """A worker's own ``<name>.timeline.npz`` (uncompressed, written by the recorder)."""
    timelines = load_job_timelines(path)
    if len(timelines) != 1:
        raise DripleError(f"{path} holds {len(timelines)} ranks, expected one")
    return next(iter(timelines.values()))
