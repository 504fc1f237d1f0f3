"""Job -> row, and the result table ``results.csv`` (one row per job run).

After a job, every rank's sampled series is labelled over its measurement window (from its
first measured iteration's start to its last iteration's end, warm-up excluded). The row
holds the mean over *workers* of the 13 targets (parameter servers are labelled too, in the
per-rank detail ``raw/<job_id>.json``, not in the mean).

Row columns (units):
- ``job_id``, ``setting`` (id), ``model``, ``family``, ``knobs`` (JSON), ``batch_size`` (per
  worker), ``optimizer``, ``lr``, ``seed``, ``seconds`` (asked measurement length, s)
- the 13 targets of :func:`driple.metrics.target_names` from the timeline labeller (see
  :mod:`driple.collect.labels.timeline`): the 12 burst/idle metrics (%, MB, MB/s, s) and
  ``step_time`` (median iteration period, s); ``samples_per_s`` (workers x batch / step time)
- ``iter_time_mean_s``, ``iter_time_std_s`` (over all measured iterations of all workers),
  ``iterations`` (measured, fewest of any worker), ``tx_bytes_per_iter``,
  ``rx_bytes_per_iter`` (per worker, mean over workers, B), ``param_bytes`` (model parameters, B)
- contention and hardware: ``host_other_cpu_pct`` (host CPU used by other processes, %),
  ``run_delay_pct`` (time the ranks' training threads were runnable but waited for a CPU,
  % of the window, mean over ranks), ``cpu_model``, ``cpu_cores``, ``gpu_model``; ``labels`` (the labeller version)
- ``hardware``: the machine's :class:`~driple.hardware.spec.HardwareSpec` (JSON) probed right
  before the job (:func:`driple.collect.launcher.host_probe`), with ``probe_gemm_gflops`` and
  ``probe_copy_gb_s`` (its float32 matmul and copy speed) for a glance; rows of datasets
  collected before the probe existed lack them and stand on their dataset's recorded figures
  (:mod:`driple.hardware.rows`)
- ``status`` (``ok``/``failed``), ``reason``, ``started`` (UTC ISO), ``duration_s`` (wall time of
  the whole job incl. start-up, s), ``raw_path`` / ``timeline_path`` (relative to the table)
- then the timeline labeller's extras (bursts per iteration, spreads) and the paper's k-means
  labels as ``kmeans_<metric>`` (and its pattern shares), mean over workers.

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
from driple.hardware.host_check import QUIET_HOST_PCT
from driple.metrics import target_names

# a measurement during which other processes used more than this % of the host CPU is
# "contended": training leaves it out (--max-contention) and `collect run` says so
CONTENDED_PCT = QUIET_HOST_PCT

LABELS_VERSION = "timeline-v2"
BASE_COLUMNS = tuple(dict.fromkeys((  # once each: labels v2 declare step_time as a target
    "job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "lr", "seed", "seconds",
    *target_names(), "step_time", "samples_per_s",
    "iter_time_mean_s", "iter_time_std_s", "iterations",
    "tx_bytes_per_iter", "rx_bytes_per_iter", "param_bytes", "host_other_cpu_pct", "run_delay_pct",
    "cpu_model", "cpu_cores", "gpu_model", "labels",
    "status", "reason", "started", "duration_s", "raw_path", "timeline_path",
)))
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

    def raw_rows(self) -> tuple[list[str], list[dict]]:
        """``(columns, rows)`` as written, every row of the history, cells as text."""
        if not self.path.exists():
            return list(self.columns), []
        with self._locked():
            return self._rows()

    def append(self, row: dict) -> None:
        """Add one row (new columns extend the header; old rows get them empty)."""
        with self._locked():
            columns, rows = self._rows()
            rows.append({k: _cell(v) for k, v in row.items()})
            self._write(columns, rows, list(row))

    def update_last(self, values: dict[str, dict]) -> int:
        """Set columns of the last row of each job in ``values`` (``{job_id: {column: value}}``),
        history rows untouched; returns how many rows changed. Used to relabel a dataset."""
        with self._locked():
            columns, rows = self._rows()
            last = {r["job_id"]: i for i, r in enumerate(rows)}
            extra = []
            for jid, cols in values.items():
                if jid in last:
                    rows[last[jid]].update({k: _cell(v) for k, v in cols.items()})
                    extra += [c for c in cols if c not in extra]
            self._write(columns, rows, extra)
            return sum(1 for jid in values if jid in last)

    def _write(self, columns: list[str], rows: list[dict], new_columns) -> None:
        for c in list(self.columns) + list(new_columns):
            if c not in columns:
                columns.append(c)
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

    def check_hardware(self, allow: bool = False) -> None:
        """Refuse to add rows from this host to a table measured on another CPU/GPU model.

        Every row names its machine (its ``hardware`` spec), but an inspector's priors still
        take one machine's figures for all its training rows (step times differ 1.2x between
        the CPUs seen on this project's hosts): until they take each row's own, one dataset holds
        one model. ``allow`` lets it through (the rows still say which machine measured them).
        """
        if allow or not self.path.exists():
            return
        from driple.errors import DripleError

        here = hardware()
        _, rows = self._rows()
        for key in ("cpu_model", "gpu_model"):
            seen = sorted({r.get(key) or "" for r in rows if r.get("status") == "ok"} - {""})
            mine = here.get(key) or ""
            others = [m for m in seen if m != mine]
            if others:
                raise DripleError(
                    f"{self.path} holds rows measured on {key.replace('_', ' ')} {others[0]!r}; this host "
                    f"has {mine or 'none'!r}. One dataset holds one hardware model (another model is "
                    "another setting): write to another directory, or pass --allow-other-hardware")

    def done_ids(self, retry_failed: bool = False, max_contention: float | None = None,
                 max_run_delay: float | None = None) -> set[str]:
        """Jobs a sweep skips: the last row is ``ok``, or failed for a reason other than Ctrl-C.

        With ``max_run_delay`` (%), an ``ok`` row whose ranks waited longer than that share of
        the window for a CPU (``run_delay_pct``) is not done either.
        With ``max_contention`` (% of host CPU), an ``ok`` row whose ``host_other_cpu_pct``
        exceeds it is not done: it was measured while other processes loaded the host.
        """
        done = set()
        _, rows = self._rows()
        last = {r["job_id"]: r for r in rows}
        for jid, r in last.items():
            if r["status"] == "ok":
                if (max_contention is None or not _contended(r.get("host_other_cpu_pct"), max_contention)) and \
                        (max_run_delay is None or not _contended(r.get("run_delay_pct"), max_run_delay)):
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


_HOST = None


def hardware() -> dict:
    """CPU model, cores and GPU model(s) of this host, for every row (cached per process)."""
    global _HOST
    if _HOST is None:
        from driple.collect.provenance import host_facts

        facts = host_facts()
        _HOST = {"cpu_model": facts.get("cpu_model"), "cpu_cores": facts.get("cores"),
                 "gpu_model": ";".join(facts.get("gpus") or []) or None}
    return dict(_HOST)


def unrun_row(spec, setting, job_id: str, seconds: float | None, reason: str, **extra) -> dict:
    """The failed row of a job that never reached its launcher, or whose result was lost (a
    scheduler cancelled it, its node died): the job's fields, no figures, the ``reason``."""
    from datetime import datetime, timezone

    return {
        "job_id": job_id, "setting": setting.id, "model": spec.model, "family": None,
        "knobs": json.dumps(spec.knobs, sort_keys=True), "batch_size": spec.batch_size,
        "optimizer": spec.optimizer, "lr": spec.lr, "seed": spec.seed, "seconds": seconds,
        **{m: float("nan") for m in target_names()}, "step_time": float("nan"),
        "iterations": 0, "labels": LABELS_VERSION, "status": "failed", "reason": reason,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), **extra,
    }


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
        "step_time": float("nan"),
        "samples_per_s": float("nan"),
        "iter_time_mean_s": float("nan"),
        "iter_time_std_s": float("nan"),
        "iterations": 0,
        "tx_bytes_per_iter": float("nan"),
        "rx_bytes_per_iter": float("nan"),
        "param_bytes": first.get("param_bytes"),
        "host_other_cpu_pct": float("nan"),
        "run_delay_pct": float("nan"),
        **hardware(),
        "labels": LABELS_VERSION,
        "status": run.status,
        "reason": run.reason,
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration_s, 3),
        "raw_path": None,
        "timeline_path": None,
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
        "labels": LABELS_VERSION,
        "ranks": {n: {"info": infos.get(n), "target": next((t.to_dict() for t in run.targets if t.name == n), None)}
                  for n in run.names},
        "iterations_ns": {n: a.tolist() for n, a in iters.items()},
        "buckets": {n: a.tolist() for n, a in buckets.items()},
    }
    if row["status"] == "ok":
        try:
            _analyse(run, row, detail, out_dir, buckets)
        except Exception as err:  # noqa: BLE001 - the job ran; say why it has no figures
            row["status"], row["reason"] = "failed", f"analysis failed: {_one_line(err)}"
            detail["status"], detail["reason"] = row["status"], row["reason"]
    return row, detail


def _one_line(err: Exception) -> str:
    from driple.errors import DripleError

    text = str(err).splitlines()[0] if str(err) else ""
    return text if isinstance(err, DripleError) else f"{type(err).__name__}: {text}"


def _seconds(run) -> float | None:
    try:
        return json.loads((run.work / "job.json").read_text())["seconds"]
    except (OSError, KeyError, ValueError):
        return None


def _analyse(run, row: dict, detail: dict, out_dir: Path, buckets: dict) -> None:
    import numpy as np

    from driple.collect.labels.job import label_job, series_time
    from driple.collect.series import host_busy_cores, read_raw
    from driple.collect.timeline.record import read_rank_file, save_job_timelines
    from driple.errors import DripleError

    timelines = {}
    for name in run.names:
        f = run.work / f"{name}.timeline.npz"
        if f.exists():
            timelines[name] = read_rank_file(f)
        elif name.startswith("worker"):
            raise DripleError(f"{name} wrote no timeline (it ended before its measurement was saved)")
    if run.raw_path is None:
        raise DripleError("the sampler saved no series")
    tl_path = run.raw_dir / f"{run.job_id}.timeline.npz"
    save_job_timelines(tl_path, timelines)
    row["timeline_path"] = os.path.relpath(tl_path, out_dir)
    series = read_raw(run.raw_path)
    labels = label_job(timelines, series)
    row.update({k: v for k, v in labels.row.items()})
    detail["per_rank"] = labels.per_rank
    detail["worker_agreement"] = labels.agreement

    workers = [n for n in timelines if n.startswith("worker")]
    times = np.concatenate([(timelines[n].measured[:, 1] - timelines[n].measured[:, 0]) / 1e9 for n in workers])
    row["iter_time_mean_s"] = float(times.mean())
    row["iter_time_std_s"] = float(times.std())
    row["iterations"] = int(min(len(timelines[n].measured) for n in workers))
    bs = row["batch_size"]
    if bs and row.get("step_time") and np.isfinite(row["step_time"]):
        row["samples_per_s"] = float(len(workers) * float(bs) / row["step_time"])
    per_iter = {"tx": [], "rx": []}
    job_cores, delays = 0.0, []
    windows = [labels.per_rank[n]["window_ns"] for n in workers]
    union = (min(w[0] for w in windows), max(w[1] for w in windows))
    u0, u1 = series_time(series, union[0]), series_time(series, union[1])
    for name, tl in timelines.items():
        df = series.rates(name)
        entry = labels.per_rank[name]
        if name in workers:
            per_iter["tx"].append(entry["tx_bytes"] / len(tl.measured))
            per_iter["rx"].append(entry["rx_bytes"] / len(tl.measured))
            b = buckets.get(name)
            if b is not None and len(b):
                last = b[b[:, 0] == b[:, 0].max()]
                entry["buckets_last_iteration_bytes"] = last[:, 2].tolist()
                entry["allreduce_mean_s"] = float(((b[:, 4] - b[:, 3]) / 1e9).mean())
        cores = next((t.cores for t in run.targets if t.name == name), 1.0)
        job_cores += float(df["compute"][(df.index > u0) & (df.index <= u1)].mean()) / 100.0 * cores
        sched = tl.meta.get("schedstat") or {}
        if sched.get("window_ns") and "main_wait_ns" in sched:
            delays.append(100.0 * sched["main_wait_ns"] / sched["window_ns"])
    row["tx_bytes_per_iter"] = float(np.mean(per_iter["tx"]))
    row["rx_bytes_per_iter"] = float(np.mean(per_iter["rx"]))
    if delays:
        row["run_delay_pct"] = float(np.mean(delays))
    # How much of the host other processes (and the sampler) used meanwhile: rows measured on a
    # contended host can be told apart and filtered.
    busy = host_busy_cores(series, u0, u1)
    if busy is not None:
        row["host_other_cpu_pct"] = max(0.0, busy - job_cores) / (os.cpu_count() or 1) * 100.0
