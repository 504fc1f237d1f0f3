"""The one way from a model to a profile: a model (or zoo name, or user factory) in, a profile out.

    from driple import Predictor
    p = Predictor.load("cpu-ddp-w2-lo")              # a shipped inspector, by setting
    prof = p.predict(model, example_batch, optimizer="adam", batch_size=64)
    prof.metrics, prof.intervals, prof.to_dict(), prof.timeseries(2.0)
    p.predict_zoo("resnet50", batch_size=32)
    p.predict_job("mypkg.models:build", batch_size=32)   # the user's factory, named explicitly
    p.predict_many(graphs)                           # graphs already built: one batched pass

It wraps a :class:`~driple.inspector.checkpoint.TrainedInspector` (network + scalers) and its
calibrated :class:`~driple.predict.intervals.ConformalIntervals`; the job's graph is built with
the builder options the inspector was trained with, for the inspector's setting. Only shapes
are traced: a zoo model or a user factory's model is built on the meta device and every
example batch is made of meta tensors (:mod:`driple.zoo.workload`), so a batch of 100,000
costs what a batch of 32 does and a large model never needs its weights in memory.
"""
from __future__ import annotations

import os
import time
from typing import Any, Optional, Sequence

import numpy as np

from driple.errors import DripleError


def _looks_like_path(name: str) -> bool:
    """True when ``name`` is meant as a checkpoint path rather than a setting id: it has a
    directory part or ends in ``.pt``, or it holds a checkpoint (a file, or a directory with
    ``inspector.pt``) and is no shipped setting. A local folder named like a setting (a
    dataset, a ``collect run --out``) never shadows the shipped inspector; write
    ``./NAME`` to mean the folder."""
    if os.sep in name or "/" in name or name.endswith(".pt"):
        return True
    from driple.inspector.checkpoint import checkpoint_path
    from driple.predict.registry import list_settings

    if not os.path.isfile(checkpoint_path(name)):
        return False
    try:
        return name not in {e["setting"] for e in list_settings()}
    except DripleError:  # an unreadable registry: the local checkpoint is what is left
        return True


class Predictor:
    """A trained inspector ready for scheduling questions.

    Args:
        inspector: The :class:`~driple.inspector.checkpoint.TrainedInspector`.
        entry: Its registry entry, if it was loaded by setting name.
    """

    def __init__(self, inspector, entry: Optional[dict] = None, hardware: Any = "trained"):
        from driple.predict.intervals import ConformalIntervals

        self.inspector = inspector
        self.entry = dict(entry or {})
        record = inspector.info.get("intervals")
        self.intervals = ConformalIntervals.from_dict(record) if record else None
        self.unseen = None  # the calibration for jobs of families the inspector did not train on
        if inspector.info.get("unseen_family"):
            from driple.predict.unseen import UnseenFamilyCalibration

            self.unseen = UnseenFamilyCalibration.from_dict(inspector.info["unseen_family"])
        self.timings: dict = {}
        self.hardware_name, self.hardware = "trained", self.trained_hardware()
        if hardware not in (None, "trained"):
            self.use_hardware(hardware)

    # ------------------------------------------------------------------ hardware
    def trained_hardware(self):
        """The :class:`~driple.hardware.spec.HardwareSpec` of the machine the inspector's jobs
        were measured on: the figures its checkpoint records, with the usable cores its registry
        entry records (``spec``); None without figures."""
        from driple.hardware.spec import HardwareSpec

        host = self.inspector.host
        if host is None:
            return None
        cores = (self.entry.get("spec") or {}).get("cores_available")
        return HardwareSpec.from_host_speed(host, how=f"recorded with the inspector: {host.how}", cores=cores)

    def use_hardware(self, hardware: Any) -> "Predictor":
        """Predict for ``hardware`` from now on: ``"trained"`` (the machine the jobs were
        measured on, the default), ``"this"`` (this host, probed now, a few seconds), a path to
        a spec file (``driple hardware probe --json``) or a
        :class:`~driple.hardware.spec.HardwareSpec`. Durations and the step time are carried
        over by the roofline (:mod:`driple.hardware.scaling`)."""
        from driple.hardware.spec import HardwareSpec, load_spec

        if isinstance(hardware, HardwareSpec):
            name, spec = "given", hardware
        elif hardware in (None, "trained"):
            name, spec = "trained", self.trained_hardware()
        elif hardware == "this":
            from driple.hardware.probe import probe

            name, spec = "this host", probe()
        elif isinstance(hardware, (str, os.PathLike)) and str(hardware):
            name, spec = str(hardware), load_spec(hardware)
        else:
            raise DripleError(f"hardware must be 'trained', 'this' or a spec file, not {hardware!r}")
        if name != "trained" and (self.inspector.roofline is None or self.inspector.host is None):
            raise DripleError(f"the {self.setting} inspector records no roofline and host figures, "
                              "so it predicts only for the machine it was trained on (--hardware trained)")
        self.hardware_name, self.hardware = name, spec
        return self

    def _simulated_memory(self, graphs) -> Optional[dict]:
        """The memory simulator's answer for ``graphs`` (:mod:`driple.graph.memory`, fitted to the
        setting as the registry entry's ``memory`` says): ``sampled_mb`` (the peak the memory
        label sees, per graph), ``rel`` (the interval's half-width, relative) and one record per
        graph: true peak, breakdown, the worker slot's memory and whether the job fits in it.
        None when the entry has no fit or a graph carries no simulation (cached older graphs)."""
        fit = self.entry.get("memory") or {}
        summaries = [getattr(g, "summary", None) or {} for g in graphs]
        if not fit or any("memory_sampled_mb" not in s for s in summaries):
            return None
        offset, scale = float(fit["offset_mb"]), float(fit["scale"])
        capacity = self.slot_memory_mb()
        path = self.blas_path()
        records, sampled = [], []
        for s in summaries:
            heap = float(s.get("library_heap_mb") or 0.0)
            blas = float((s.get("memory_blas_mb") or {}).get(path) or 0.0)
            sampled.append(offset + heap + scale * (float(s["memory_sampled_mb"]) + blas))
            peak = offset + heap + scale * (float(s["memory_peak_mb"]) + blas)
            parts = {k: scale * float(v) for k, v in (s.get("memory_breakdown_mb") or {}).items()}
            parts["runtime"] = offset
            if heap:
                parts["libraries"] = heap
            if blas:
                parts["blas_buffers"] = scale * blas
            record = {"source": "simulated", "peak_mb": peak, "phase": s.get("memory_phase"),
                      "breakdown_mb": parts, "slot_mb": capacity}
            if capacity:
                record["fits"] = bool(peak <= capacity)
                record["exceeds_by_mb"] = max(0.0, peak - capacity)
            records.append(record)
        return {"sampled_mb": np.array(sampled), "rel": float(fit.get("interval_rel", 0.05)), "records": records}

    def blas_path(self) -> str:
        """The BLAS code path of the machine predicted for, whose kept buffers a memory prediction
        adds (:mod:`driple.hardware.blas`); ``""`` when the setting's memory fit left them out
        (an entry fitted before they were counted) or the machine's path is not known."""
        from driple.hardware.blas import spec_path

        if not (self.entry.get("memory") or {}).get("blas_buffers"):
            return ""
        return spec_path(self.hardware if self.hardware is not None else self.trained_hardware())

    def _memory_shares(self, graphs) -> Optional[dict]:
        """The memory cycle's answer for ``graphs`` (:mod:`driple.graph.memory_cycle`): per graph
        the share of its step the memory level is above its midpoint (NaN where a graph carries
        no cycle: one built before cycles were), on the machine described, with the setting's
        tail fit (registry entry ``memory.cycle``) and the relative error its burst and idle
        shares had on held-out families. None when the entry has no tail fit."""
        from driple.graph.memory_cycle import MemoryCycle, TailFit

        fit = (self.entry.get("memory") or {}).get("cycle")
        if not fit or self.hardware is None:
            return None
        try:
            tail = TailFit.from_dict(fit["tail"])
        except (KeyError, TypeError, ValueError) as err:
            raise DripleError(f"the registry entry of {self.setting} has an unreadable memory cycle "
                              f"({type(err).__name__}: {err}); run python scripts/fit_memory.py --write") from None
        host = self.hardware.host_speed()
        shares = []
        for g in graphs:
            record = (getattr(g, "summary", None) or {}).get("memory_cycle")
            shares.append(float("nan") if not record else tail.burst_fraction(
                MemoryCycle.from_dict(record), host.flops_per_s, host.memory_bytes_per_s))
        return {"shares": np.array(shares), "rel": fit.get("share_rel") or {}}

    def largest_batch(self, model: str, optimizer: str = "sgd", knobs: Optional[dict] = None,
                      start: int = 1, library_heap_mb: float = 0.0) -> Optional[dict]:
        """The largest batch per worker whose simulated peak fits a worker's slot
        (:func:`driple.predict.fit_batch.largest_batch`, the registry's memory fit applied to
        each simulation); None when the entry has no memory fit or the slot's memory is unknown."""
        from driple.graph.memory import simulate_job
        from driple.predict.fit_batch import largest_batch
        from driple.settings import parse_setting

        fit, capacity = self.entry.get("memory") or {}, self.slot_memory_mb()
        if not fit or not capacity:
            return None
        setting = parse_setting(self.setting)
        offset, scale = float(fit["offset_mb"]) + float(library_heap_mb), float(fit["scale"])
        path = self.blas_path()

        def peak_mb(batch: int) -> float:
            sim = simulate_job(model, batch, optimizer, setting.strategy, workers=setting.workers,
                               blas_path=path, **(knobs or {}))
            return offset + scale * sim.peak_mb

        return {**largest_batch(peak_mb, capacity, start=start), "slot_mb": capacity}

    def slot_memory_mb(self) -> Optional[float]:
        """Memory of one worker's slot on the machine predicted for (MB): the host's memory,
        shared by the ranks of a loopback setting; None when the spec does not say."""
        from driple.predict.colocate import ranks_per_host

        spec = self.hardware
        if spec is None or not spec.memory_bytes:
            return None
        return float(spec.memory_bytes) / 1e6 / ranks_per_host(self.setting)

    def _carried_note(self) -> Optional[str]:
        """The caveat of a prediction carried to another CPU model (docs/hardware.md)."""
        trained = self.trained_hardware()
        if trained is None or self.hardware is None:
            return None
        from driple.hardware.host_check import cpu_family

        a, b = cpu_family(trained.cpu_model), cpu_family(self.hardware.cpu_model)
        if a == b or not a or not b:
            return None
        return (f"carried from {trained.cpu_model} to {self.hardware.cpu_model} by matmul and copy "
                "peaks: between CPU models the peaks differ more than training steps do, and the "
                "carried durations measured worse than the uncarried ones (docs/hardware.md)")

    def hardware_record(self) -> Optional[dict]:
        """What a profile says of the machine it describes: ``{"described", "spec"}``, and for a
        prediction carried to another machine ``measured_error``: how far this inspector's
        carried predictions were measured off, per machine it was checked on (registry
        ``carried``; ``[]`` when never measured)."""
        if self.hardware is None:
            return None
        record = {"described": self.hardware_name, "spec": self.hardware.to_dict()}
        if self.hardware_name != "trained":
            record["measured_error"] = list(self.entry.get("carried") or [])
        return record

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, setting: Optional[str] = None, hardware: Any = "trained") -> "Predictor":
        """The shipped inspector of ``setting`` (a setting id such as ``"cpu-ddp-w2-lo"``; None:
        the registry's default), or a checkpoint file / trained-model directory by path;
        ``hardware``: the machine to predict for (:meth:`use_hardware`)."""
        from driple.inspector.checkpoint import load_inspector
        from driple.predict.registry import resolve

        if setting and _looks_like_path(setting):
            from driple.predict.registry import entry_for

            return cls(load_inspector(setting), entry_for(setting) or {"setting": None, "path": setting},
                       hardware=hardware)
        path, entry = resolve(setting)
        return cls(load_inspector(str(path)), entry, hardware=hardware)

    @property
    def resident(self) -> Optional[dict]:
        """``{resource: amount}`` a worker holds beside the predicted demand (the registry entry's
        ``resident``, measured on the inspector's training jobs), or None."""
        record = self.entry.get("resident") or {}
        held = {r: float(v) for r, v in record.items() if r in ("compute", "memory", "tx", "rx")
                and isinstance(v, (int, float))}
        return held or None

    @property
    def setting(self) -> str:
        s = self.inspector.setting
        if not s or "," in s:
            raise DripleError("this inspector records no single setting it was trained for")
        return s

    # ------------------------------------------------------------------ graphs
    def build_graph(self, model, example_batch, loss_fn=None, optimizer: Any = "sgd"):
        """The inspector's input for one training step of ``model`` in this setting."""
        from driple.graph.build import build_input

        return build_input(model, example_batch, loss_fn=loss_fn, optimizer=optimizer,
                           strategy=self.setting, **self.inspector.build_options())

    # ------------------------------------------------------------------ predictions
    def predict(self, model, example_batch, loss_fn=None, optimizer: Any = "sgd",
                batch_size: Optional[int] = None, name: Optional[str] = None,
                family: Optional[str] = None, library_heap_mb: float = 0.0):
        """:class:`~driple.predict.profile.ResourceProfile` of training ``model`` on batches
        like ``example_batch`` (inputs, or ``(inputs, targets)``); ``batch_size`` resizes the
        example batch along its first dimension, as shapes only (nothing is allocated).
        ``family``: the model's zoo family if it is one (default ``"user"``: a model of no family
        the inspector trained on, predicted with its unseen-family calibration).
        ``library_heap_mb``: the heap the model's own code adds to a worker (its libraries), which
        the memory simulation adds to the runtime's (:func:`driple.graph.memory.library_heap_mb`)."""
        from driple.predict.unseen import USER_FAMILY

        if batch_size is not None:
            example_batch = resize_batch(example_batch, batch_size, device="meta")
        t0 = time.perf_counter()
        graph = self.build_graph(model, example_batch, loss_fn, optimizer)
        graph.summary["family"] = family or USER_FAMILY
        graph.summary["library_heap_mb"] = float(library_heap_mb)
        t1 = time.perf_counter()
        label = name or type(model).__name__
        bs = batch_size or batch_len(example_batch)
        profile = self.predict_many([graph], names=[_describe_job(label, bs, optimizer)])[0]
        self.timings = {"build_s": t1 - t0, "infer_s": time.perf_counter() - t1}
        return profile

    def predict_zoo(self, name: str, batch_size: Optional[int] = None, optimizer: str = "sgd",
                    **knobs):
        """:meth:`predict` for a zoo model by name and knobs (see ``driple zoo``)."""
        return self.predict_job(name, batch_size=batch_size, optimizer=optimizer, knobs=knobs)

    def predict_job(self, model: str, batch_size: Optional[int] = None, optimizer: str = "sgd",
                    knobs: Optional[dict] = None):
        """:meth:`predict` for a zoo name or a user factory ``module:function`` /
        ``file.py:function`` (which returns a workload or an ``nn.Module`` with
        ``input_shape``; see :mod:`driple.zoo.workload`). The model is built on the meta
        device when it can be, and the batch as meta tensors."""
        workload, batch = load_job_batch(model, batch_size, knobs or {})
        bs = batch_size or batch_len(batch)
        label = getattr(workload, "name", None) or model
        knob_text = ",".join(f"{k}={v}" for k, v in sorted((knobs or {}).items()))
        heap = 0.0
        if self.entry.get("memory"):  # a user's factory: the heap its libraries add (a subprocess)
            from driple.graph.memory import library_heap_mb
            from driple.settings import parse_setting

            heap = library_heap_mb(model, bs or 1, knobs or {}, parse_setting(self.setting).strategy)
        try:
            return self.predict(workload.model, batch, loss_fn=workload.loss_fn,
                                optimizer=optimizer, family=getattr(workload, "family", None),
                                name=f"{label}[{knob_text}]" if knob_text else label, library_heap_mb=heap)
        except DripleError as err:
            raise DripleError(f"{model} (batch size {bs}): {err}") from None

    def predict_many(self, graphs: Sequence, names: Optional[Sequence[str]] = None,
                     batch_size: int = 16) -> list:
        """Profiles of graphs already built (:meth:`build_graph` or
        :func:`driple.graph.build.build_input` with this inspector's options), in one batched
        pass (``batch_size`` graphs at a time; 16-32 is fastest on a CPU). Amounts are kept
        within what a worker can physically do and extrapolations are noted in each profile's
        ``notes`` (:mod:`driple.predict.bounds`)."""
        from driple.predict.unseen import SEEN, UNSEEN
        from driple.predict.profile import ResourceProfile

        graphs = list(graphs)
        if not graphs:
            return []
        from driple.predict.bounds import SCALED, bound, caps, floors, hold_together

        ts = self.inspector.target_scaler
        targets = list(self.inspector.targets)  # the declared ones: a checkpoint must match them
        host = self.inspector.host
        memory_mb = host.memory_mb if host is not None and host.memory_mb > 0 else None
        predicted = self.inspector.predict(graphs, batch_size=batch_size)
        unseen = self.unseen_rows(graphs)
        if unseen.any() and self.unseen.joined:
            # a family it did not train on, and modes chosen on held-out families to apply, each
            # with the roofline it was chosen with
            rows = [g for g, u in zip(graphs, unseen) if u]
            rooflines = self.unseen.roofline_predictions(rows, own=self.inspector.roofline)
            predicted[unseen] = self.unseen.join(predicted[unseen], rooflines, targets)
        carried_note = None
        if self.hardware_name != "trained":
            from driple.hardware.scaling import carry, core_ratio, peaks, roofline_ratio
            from driple.predict.profile import device_of

            trained, ranks = self.trained_hardware(), _ranks(self.setting)
            source, target = peaks(trained, self.hardware, ranks)
            ratio = roofline_ratio(self.inspector.roofline, graphs, source, target)
            predicted = carry(predicted, ratio, targets, device_of(self.setting),
                              core_ratio(trained, self.hardware, ranks))
        carried_note = self._carried_note()
        memory = self._simulated_memory(graphs)
        if memory is not None:  # the simulated peak replaces the network's, and is never clipped
            predicted[:, targets.index(MEMORY_TARGET)] = memory["sampled_mb"]
            memory_mb = None
        shares = self._memory_shares(graphs)
        timed = np.zeros(len(graphs), dtype=bool)
        if shares is not None:  # memory burst and idle: the simulated cycle's share of the step
            step = predicted[:, targets.index(STEP_TARGET)]
            timed = np.isfinite(shares["shares"]) & np.isfinite(step)
            predicted[timed, targets.index(MEMORY_BURST)] = shares["shares"][timed] * step[timed]
            predicted[timed, targets.index(MEMORY_IDLE)] = (1 - shares["shares"][timed]) * step[timed]
            if memory is not None:  # what the profile's memory record says of its durations
                for record, share, ok in zip(memory["records"], shares["shares"], timed):
                    if ok:
                        record["burst_share"] = float(share)
        flags: list = []
        values, notes = bound(predicted, self.setting, ts.low_, ts.high_, memory_mb, flags=flags)
        values = hold_together(values, notes, flags)
        if carried_note:
            notes = [list(n) + [carried_note] for n in notes]
        lows = highs = None
        if self.intervals is not None:
            lows, highs = self.intervals.interval(values)
            if unseen.any():
                lows[unseen], highs[unseen] = self.unseen.intervals.interval(values[unseen])
            for m, cap in caps(self.setting, ts.high_, memory_mb).items():
                highs[:, targets.index(m)] = np.minimum(highs[:, targets.index(m)], cap)
            for m, floor in floors(ts.low_).items():  # no interval below the shortest measured,
                j = targets.index(m)                   # unless the cycle was scaled to the step
                keep = np.array([SCALED not in (f.get(m) or ()) for f in flags], dtype=bool)
                lows[keep, j] = np.maximum(lows[keep, j], floor)
                highs[:, j] = np.maximum(highs[:, j], lows[:, j])
            if memory is not None:
                j = targets.index(MEMORY_TARGET)
                lows[:, j], highs[:, j] = values[:, j] * (1 - memory["rel"]), values[:, j] * (1 + memory["rel"])
            if timed.any():  # the step's interval, shared out, widened by the share's own error
                s, rel = targets.index(STEP_TARGET), shares["rel"]
                for m, share in ((MEMORY_BURST, shares["shares"]), (MEMORY_IDLE, 1 - shares["shares"])):
                    j, e = targets.index(m), float(rel.get(m, 0.0))
                    lows[timed, j] = share[timed] * lows[timed, s] * (1 - e)
                    highs[timed, j] = share[timed] * highs[timed, s] * (1 + e)
        names = list(names) if names is not None else [
            (getattr(g, "summary", None) or {}).get("model", f"graph {i}") for i, g in enumerate(graphs)]
        batch_sizes = [(getattr(g, "summary", None) or {}).get("batch_size") for g in graphs]
        out = []
        for i, row in enumerate(values):
            intervals = None
            if lows is not None:
                intervals = {m: (float(lows[i, j]), float(highs[i, j])) for j, m in enumerate(targets)}
            out.append(ResourceProfile(
                setting=self.setting, model=names[i],
                metrics={m: float(v) for m, v in zip(targets, row)},
                intervals=intervals,
                nominal_coverage=self.intervals.coverage if self.intervals is not None else None,
                notes=notes[i], batch_size=batch_sizes[i], resident=self.resident,
                hardware=self.hardware_record(),
                memory=None if memory is None else memory["records"][i],
                flags=flags[i] or None,
                calibration=None if self.unseen is None else (UNSEEN if unseen[i] else SEEN)))
        return out

    def unseen_rows(self, graphs: Sequence) -> np.ndarray:
        """Per graph, True when this inspector has an unseen-family calibration and the graph's
        model family (``family`` of a dataset's graph, ``summary["family"]`` of a built one;
        ``"user"`` for a user's factory) is not among its training families."""
        if self.unseen is None:
            return np.zeros(len(graphs), dtype=bool)
        return np.array([self.unseen.is_unseen(family_of(g)) for g in graphs], dtype=bool)

    def describe(self) -> dict:
        """What this inspector is: setting, how it was trained, scores (from the registry),
        its configuration (paper GNN, hybrid, features only), labels and host figures."""
        info = self.inspector.info
        host = self.inspector.host
        return {"setting": self.setting, "description": self.entry.get("description"),
                "trained": self.entry.get("trained"), "scores": self.entry.get("scores"),
                "hardware": self.entry.get("hardware") or measured_on(self.inspector),
                "builder": self.inspector.build_options(),
                "intervals": self.intervals.to_dict() if self.intervals else None,
                "unseen_family": self.unseen.describe() if self.unseen else None,
                "dataset": info.get("dataset"), "configuration": self.inspector.configuration_name,
                "networks": self.inspector.networks, "residual": self.inspector.residual, "labels": self.inspector.labels,
                "host": None if host is None else host.to_dict()}


def measured_on(inspector, provenance: Optional[dict] = None) -> Optional[str]:
    """The hardware an inspector's training jobs were measured on: its host figures' CPU model,
    else the dataset provenance's host."""
    host = inspector.host
    if host is not None and host.cpu_model:
        return host.cpu_model
    return ((provenance or {}).get("host") or {}).get("cpu_model")


def family_of(graph) -> Optional[str]:
    """The model family of an inspector input: a dataset graph's ``family``, else its
    ``summary["family"]`` (``"user"`` for a user's factory), else None."""
    family = getattr(graph, "family", None)
    if family is None:
        family = (getattr(graph, "summary", None) or {}).get("family")
    return None if family is None else str(family)


def _describe_job(label: str, batch_size: Optional[int], optimizer: Any) -> str:
    opt = optimizer if isinstance(optimizer, str) else getattr(optimizer, "__name__", type(optimizer).__name__)
    return f"{label}, batch {batch_size}, {opt}" if batch_size else f"{label}, {opt}"


def load_job_batch(model: str, batch_size, knobs: dict):
    """``(workload, example batch)`` of a job (:func:`load_job_workload`), the batch as meta
    tensors; a batch size below 1 and a batch that cannot be drawn as one-line errors."""
    from driple.zoo.workload import example_batch

    if batch_size is not None and int(batch_size) < 1:
        raise DripleError(f"batch size must be at least 1, not {batch_size}")
    workload = load_job_workload(model, batch_size, knobs)
    try:
        return workload, example_batch(workload, batch_size)
    except DripleError as err:
        raise DripleError(f"{model}: {err}") from None


def load_job_workload(model: str, batch_size, knobs: dict):
    """The job's workload with its model on the meta device where possible, user-code failures
    turned into clear errors."""
    from driple.zoo.workload import load_workload

    try:
        return load_workload(model, batch_size=batch_size, knobs=knobs, shapes_only=True)
    except DripleError:
        raise
    except TypeError as err:
        raise DripleError(f"calling {model} with {knobs or 'no knobs'} failed: {err}; "
                          "check the knobs it accepts") from None
    except Exception as err:  # user code: report, never a traceback
        raise DripleError(f"{model} could not be built: {type(err).__name__}: {err}") from None


def _tensors(batch):
    import torch

    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, (list, tuple)):
        for b in batch:
            yield from _tensors(b)
    elif isinstance(batch, dict):
        for b in batch.values():
            yield from _tensors(b)


def batch_len(batch) -> Optional[int]:
    for t in _tensors(batch):
        if t.dim() >= 1:
            return int(t.shape[0])
    return None


def resize_batch(batch, batch_size: int, device=None):
    """``batch`` with every tensor's first dimension repeated/cut to ``batch_size``.

    ``device="meta"`` gives the same shapes and dtypes as meta tensors, nothing allocated (what
    :meth:`Predictor.predict` traces). Refuses a batch whose tensors disagree on their first
    dimension (then the batch dimension is not the first one and resizing would be wrong).
    """
    import torch

    if int(batch_size) < 1:
        raise DripleError(f"batch size must be at least 1, not {batch_size}")
    sizes = {int(t.shape[0]) for t in _tensors(batch) if t.dim() >= 1}
    if len(sizes) > 1:
        raise DripleError(f"the example batch's tensors have different first dimensions {sorted(sizes)}; "
                          "pass an example batch of the batch size you want instead of batch_size")
    if not sizes:
        raise DripleError("the example batch holds no tensor with a batch dimension")

    def fix(obj):
        if isinstance(obj, torch.Tensor) and obj.dim() >= 1:
            if device is not None:
                obj = obj.to(device)
            reps = -(-batch_size // obj.shape[0])
            return obj.repeat(reps, *([1] * (obj.dim() - 1)))[:batch_size]
        if isinstance(obj, tuple):
            return tuple(fix(o) for o in obj)
        if isinstance(obj, list):
            return [fix(o) for o in obj]
        if isinstance(obj, dict):
            return {k: fix(v) for k, v in obj.items()}
        return obj

    return fix(batch)


MEMORY_TARGET = "memory_burst_amount"
MEMORY_BURST, MEMORY_IDLE, STEP_TARGET = "memory_burst_duration", "memory_idle_duration", "step_time"


def _ranks(setting: str) -> int:
    """Processes of a job of ``setting`` (workers and servers)."""
    from driple.settings import parse_setting

    s = parse_setting(setting)
    return int(s.workers) + int(s.servers)
