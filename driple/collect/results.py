"""Job -> row, and the result table ``results.csv`` (one row per job run).

After a job, every rank's sampled series is labelled over its measurement window (from its
first measured iteration's start to its last iteration's end, warm-up excluded). The row
holds the mean over *workers* of the 12 metrics (parameter servers are labelled too, in the
per-rank detail ``raw/<job_id>.json``, not in the mean).

Row columns (units):
- ``job_id``, ``setting`` (id), ``model``, ``family``, ``knobs`` (JSON), ``batch_size`` (per
  worker), ``optimizer``, ``lr``, ``seed``, ``seconds`` (asked measurement length, s)
- the predicted targets of :func:`driple.metrics.target_names` (%, MB/s, s)
- ``iter_time_mean_s``, ``iter_time_std_s`` (over all measured iterations of all workers),
  ``iterations`` (measured, fewest of any worker), ``samples_per_s`` (sum over workers of
  batch / mean iteration time), ``tx_bytes_per_iter``, ``rx_bytes_per_iter`` (per worker,
  mean over workers, B), ``param_bytes`` (model parameters, B)
- ``status`` (``ok``/``failed``), ``reason``, ``started`` (UTC ISO), ``duration_s`` (wall time of
  the whole job incl. start-up, s), ``raw_path`` (relative to the table)
- then whatever else the labeller reports (pattern shares), mean over workers.

The table is rewritten atomically (temp file + rename, under a lock) on every append, so a
crash or Ctrl-C at any moment leaves either the old or the new table, never a torn row.
A job that ran more than once (interrupted, retried) has several rows; :meth:`ResultTable.read`
keeps the last one per ``job_id`` unless asked for the history.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import math
import os
from pathlib import Path

from driple.csvtable import check_lines, read_csv
from driple.metrics import target_names

# a measurement during which other processes used more than this % of the host CPU is
# "contended": training leaves it out (--max-contention) and `collect run` says so
CONTENDED_PCT = 10.0

BASE_COLUMNS = (
    "job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "lr", "seed", "seconds",
    *target_names(),
    "iter_time_mean_s", "iter_time_std_s", "iterations", "samples_per_s",
    "tx_bytes_per_iter", "rx_bytes_per_iter", "param_bytes", "host_other_cpu_pct",
    "status", "reason", "started", "duration_s", "raw_path",
)
INTERRUPTED = "interrupted"  # reasons starting with this word mark jobs a sweep runs again


def is_interrupted(reason) -> bool:
    return isinstance(reason, str) and reason.startswith(INTERRUPTED)


class ResultTable:
    """``<out_dir>/results.csv``: append rows atomically, read them back with pandas."""

    columns = BASE_COLUMNS  # always in the header, in this order (subclasses: other tables)

    def __init__(self, out_dir: str | os.PathLike):
        self.dir = Path(out_dir)
        self.path = self.dir / "results.csv"

    @contextlib.contextmanager
    def _locked(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".results.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _rows(self) -> tuple[list[str], list[dict]]:
        if not self.path.exists():
            return [], []
        check_lines(self.path)  # a damaged line is named, never rewritten away
        with open(self.path, newline="") as f:
            reader = csv.DictReader(f)
            return list(reader.fieldnames or []), list(reader)

    def append(self, row: dict) -> None:
        """Add one row (new columns extend the header; old rows get them empty)."""
        with self._locked():
            columns, rows = self._rows()
            for c in list(self.columns) + list(row):
                if c not in columns:
                    columns.append(c)
            rows.append({k: _cell(v) for k, v in row.items()})
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            with open(tmp, "w", newline="") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(self.dir)

    def read(self, history: bool = False):
        """The table as a DataFrame: the last row of each job (``history=True``: every row)."""
        import pandas as pd

        if not self.path.exists():
            return pd.DataFrame(columns=list(BASE_COLUMNS))
        df = read_csv(self.path, keep_default_na=True)
        if not history and len(df):
            df = df.drop_duplicates("job_id", keep="last").reset_index(drop=True)
        return df

    def done_ids(self, retry_failed: bool = False, max_contention: float | None = None) -> set[str]:
        """Jobs a sweep skips: the last row is ``ok``, or failed for a reason other than Ctrl-C.

        With ``max_contention`` (% of host CPU), an ``ok`` row whose ``host_other_cpu_pct``
        exceeds it is not done: it was measured while other processes loaded the host.
        """
        done = set()
        _, rows = self._rows()
        last = {r["job_id"]: r for r in rows}
        for jid, r in last.items():
            if r["status"] == "ok":
                if max_contention is None or not _contended(r.get("host_other_cpu_pct"), max_contention):
                    done.add(jid)
            elif r["status"] == "failed" and not retry_failed and not is_interrupted(r["reason"]):
                done.add(jid)
        return done


def _contended(value, limit: float) -> bool:
    try:
        return float(value) > limit
    except (TypeError, ValueError):
        return False  # rows from before the measure existed: nothing to judge by


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float) and math.isnan(v):
        return ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return v


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_results(out_dir: str | os.PathLike, history: bool = False):
    """``results.csv`` of a dataset directory as a DataFrame (last row per job by default)."""
    return ResultTable(out_dir).read(history=history)


# -- job -> row ---------------------------------------------------------------------------------

def _read_lines(path: Path, width: int):
    import numpy as np

    if not path.exists():
        return np.zeros((0, width), dtype=np.int64)
    rows = [l.split() for l in path.read_text().splitlines() if l.strip()]
    rows = [r for r in rows if len(r) == width]
    return np.array(rows, dtype=np.int64).reshape(-1, width)


def build_row(run, started, duration_s: float, out_dir: Path) -> tuple[dict, dict]:
    """Row and per-rank detail of a finished :class:`~driple.collect.launcher._Run`."""
    spec, setting = run.spec, run.setting
    infos = {}
    for name in run.names:
        f = run.work / f"{name}.json"
        if f.exists():
            infos[name] = json.loads(f.read_text())
    first = next(iter(infos.values()), {})
    row = {
        "job_id": run.job_id,
        "setting": setting.id,
        "model": spec.model,
        "family": first.get("family"),
        "knobs": json.dumps(spec.knobs, sort_keys=True),
        "batch_size": first.get("batch_size", spec.batch_size),
        "optimizer": spec.optimizer,
        "lr": spec.lr,
        "seed": spec.seed,
        "seconds": _seconds(run),
        **{m: float("nan") for m in target_names()},
        "iter_time_mean_s": float("nan"),
        "iter_time_std_s": float("nan"),
        "iterations": 0,
        "samples_per_s": float("nan"),
        "tx_bytes_per_iter": float("nan"),
        "rx_bytes_per_iter": float("nan"),
        "param_bytes": first.get("param_bytes"),
        "host_other_cpu_pct": float("nan"),
        "status": run.status,
        "reason": run.reason,
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration_s, 3),
        "raw_path": None,
    }
    if run.raw_path is not None and run.raw_path.exists():
        row["raw_path"] = os.path.relpath(run.raw_path, out_dir)
    iters = {n: _read_lines(run.work / f"{n}.iters", 3) for n in run.names if n.startswith("worker")}
    buckets = {n: _read_lines(run.work / f"{n}.buckets", 5) for n in iters}
    detail = {
        "job_id": run.job_id,
        "setting": setting.to_dict(),
        "spec": spec.to_dict(),
        "status": run.status,
        "reason": run.reason,
        "warmup": spec.warmup,
        "ranks": {n: {"info": infos.get(n), "target": next((t.to_dict() for t in run.targets if t.name == n), None)}
                  for n in run.names},
        "iterations_ns": {n: a.tolist() for n, a in iters.items()},
        "buckets": {n: a.tolist() for n, a in buckets.items()},
    }
    if row["status"] == "ok":
        try:
            _analyse(run, row, detail, iters, buckets)
        except Exception as err:  # noqa: BLE001 - the job ran; say why it has no figures
            row["status"], row["reason"] = "failed", f"analysis failed: {type(err).__name__}: {err}"
            detail["status"], detail["reason"] = row["status"], row["reason"]
    return row, detail


def _seconds(run) -> float | None:
    try:
        return json.loads((run.work / "job.json").read_text())["seconds"]
    except (OSError, KeyError, ValueError):
        return None


def _analyse(run, row: dict, detail: dict, iters: dict, buckets: dict) -> None:
    import numpy as np

    from driple.collect.labeller import label_rates
    from driple.collect.series import host_busy_cores, read_raw

    warm = run.spec.warmup
    windows = {}
    for name, it in iters.items():
        measured = it[warm:]
        if len(measured) == 0:
            raise ValueError(f"{name} logged {len(it)} iterations, none after the {warm} warm-up ones")
        windows[name] = (int(measured[0, 1]), int(measured[-1, 2]))
    union = (min(w[0] for w in windows.values()), max(w[1] for w in windows.values()))
    if run.raw_path is None:
        raise ValueError("the sampler saved no series")
    series = read_raw(run.raw_path)
    per_rank = {}
    job_cores = 0.0  # CPUs the job's ranks used over the union window
    for name in run.names:
        w = windows.get(name, union)
        df = series.rates(name)
        t0, t1 = series_time(series, w[0]), series_time(series, w[1])
        labels = {k: _as_float(v) for k, v in label_rates(df, t0=t0, t1=t1).items()}
        sent, received = window_bytes(df, t0, t1)
        u0, u1 = series_time(series, union[0]), series_time(series, union[1])
        job_cores += float(df["compute"][(df.index > u0) & (df.index <= u1)].mean()) / 100.0 * \
            next((t.cores for t in run.targets if t.name == name), 1.0)
        entry = {"window_ns": list(w), "window_s": [t0, t1], "labels": labels,
                 "tx_bytes": sent, "rx_bytes": received}
        if name in iters:
            measured = iters[name][warm:]
            times = (measured[:, 2] - measured[:, 1]) / 1e9
            entry.update({
                "iterations": int(len(measured)),
                "iter_time_mean_s": float(times.mean()),
                "iter_time_std_s": float(times.std()),
                "tx_bytes_per_iter": sent / len(measured),
                "rx_bytes_per_iter": received / len(measured),
            })
            b = buckets.get(name)
            if b is not None and len(b):
                last = b[b[:, 0] == b[:, 0].max()]
                entry["buckets_last_iteration_bytes"] = last[:, 2].tolist()
                entry["allreduce_mean_s"] = float(((b[:, 4] - b[:, 3]) / 1e9).mean())
        per_rank[name] = entry
    detail["per_rank"] = per_rank

    workers = [per_rank[n] for n in iters]
    keys = [k for k in workers[0]["labels"]]
    for k in keys:
        row[k] = float(np.nanmean([w["labels"].get(k, np.nan) for w in workers]))
    all_times = np.concatenate([(iters[n][warm:, 2] - iters[n][warm:, 1]) / 1e9 for n in iters])
    row["iter_time_mean_s"] = float(all_times.mean())
    row["iter_time_std_s"] = float(all_times.std())
    row["iterations"] = int(min(w["iterations"] for w in workers))
    bs = row["batch_size"]
    if bs:
        row["samples_per_s"] = float(sum(float(bs) / w["iter_time_mean_s"] for w in workers))
    row["tx_bytes_per_iter"] = float(np.mean([w["tx_bytes_per_iter"] for w in workers]))
    row["rx_bytes_per_iter"] = float(np.mean([w["rx_bytes_per_iter"] for w in workers]))
    # How much of the host other processes (and the sampler) used meanwhile: rows measured on a
    # contended host can be told apart and filtered.
    busy = host_busy_cores(series, series_time(series, union[0]), series_time(series, union[1]))
    if busy is not None:
        row["host_other_cpu_pct"] = max(0.0, busy - job_cores) / (os.cpu_count() or 1) * 100.0


def _as_float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def series_time(series, t_ns: int) -> float:
    """A monotonic-clock instant (ns, as the workers log it) on the series' time axis (s)."""
    return (t_ns - series.start_ns) / 1e9


def window_bytes(df, t0: float, t1: float) -> tuple[float, float]:
    """Bytes sent and received in ``[t0, t1]`` (s), integrating the MB/s rates of ``df``."""
    import numpy as np

    t = (df["t"] if "t" in df.columns else df.index).to_numpy(dtype=float)
    if len(t) == 0:
        return 0.0, 0.0
    out = []
    for col in ("tx", "rx"):
        rate = df[col].to_numpy(dtype=float) * 1e6
        # rate[i] covers (t[i-1], t[i]]: clip each interval to the window
        first = max(0.0, 2 * t[0] - t[1]) if len(t) > 1 else 0.0
        lo = np.concatenate([[first], t[:-1]])
        overlap = np.clip(np.minimum(t, t1) - np.maximum(lo, t0), 0, None)
        out.append(float(np.nansum(rate * overlap)))
    return out[0], out[1]

