"""The measured jobs a simulated cluster runs: each with its measured profile (what the oracle and
the interference model see) and driple's predicted profile (what the guided policy sees).

A catalogue is one setting's measured dataset (``datasets/v2/cpu-ddp-w2-1g`` for the shipped
one): for every ok job its configuration, the 13 measured targets of one worker, and the same
13 targets predicted by the setting's shipped inspector (:meth:`Predictor.predict_job`), with
the memory the runtime holds beside the tensors (``resident``, MB). It is a JSON file
(``catalogue-<setting>.json`` beside this module) so that ``driple simulate`` runs from a wheel,
without the datasets or a minute of predictions; :func:`build_catalogue` writes it again::

    python -c "from driple.schedule.catalogue import build_catalogue; \\
        build_catalogue('datasets/v2/cpu-ddp-w2-1g', 'driple/schedule/catalogue-cpu-ddp-w2-1g.json')"

The capacity of one worker slot is stored with it: 1 core (compute 100 %: a 2-core host shared
by 2 workers, as in the measured co-runs) and half the host's memory (MB).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from driple.errors import DripleError

FORMAT = "driple-schedule-catalogue/1"
DEFAULT_SETTING = "cpu-ddp-w2-1g"


@dataclass(frozen=True)
class CatalogueJob:
    """One measured job: ``job_id`` (the dataset's), ``name`` (e.g. ``resnet bs32 adam``),
    ``measured`` and ``predicted`` :class:`~driple.predict.profile.ResourceProfile` of one worker,
    and ``split``: ``train``, ``val`` or ``test`` in the inspector's split (``train``: the
    inspector learned this very job; None when the inspector records no split)."""

    job_id: str
    name: str
    measured: object
    predicted: object
    split: str | None = None


@dataclass
class Catalogue:
    """The jobs of one setting and the capacity of one worker slot (``{"compute": %, "memory":
    MB}``)."""

    setting: str
    jobs: list
    capacity: dict
    source: str = ""

    def __len__(self) -> int:
        return len(self.jobs)


def default_path(setting: str = DEFAULT_SETTING) -> Path:
    return Path(__file__).with_name(f"catalogue-{setting}.json")


def _profile(setting: str, name: str, metrics: dict, resident: dict | None):
    from driple.predict.profile import ResourceProfile

    return ResourceProfile(setting=setting, model=name, metrics=metrics, resident=resident)


def job_splits(predictor) -> dict:
    """``{job_id: "train" | "val" | "test"}`` from the inspector's recorded split."""
    split = predictor.inspector.info.get("split") or {}
    return {j: part for part in ("train", "val", "test") for j in (split.get(part) or [])}


def held_out(catalogue: Catalogue) -> Catalogue:
    """The catalogue's jobs that the inspector did not train on (its ``val`` and ``test`` jobs)."""
    jobs = [j for j in catalogue.jobs if j.split in ("val", "test")]
    if not jobs:
        raise DripleError(f"the {catalogue.setting} catalogue records no job held out from its inspector")
    return Catalogue(setting=catalogue.setting, jobs=jobs, capacity=dict(catalogue.capacity),
                     source=catalogue.source + " (held-out jobs)")


def load_catalogue(path: str | os.PathLike | None = None) -> Catalogue:
    """Read a catalogue file, or the shipped catalogue of a setting id (default: ``cpu-ddp-w2-1g``)."""
    if path is None or (isinstance(path, str) and os.sep not in path and not path.endswith(".json")):
        path = default_path(path or DEFAULT_SETTING)
        if not path.exists():
            shipped = sorted(p.name[len("catalogue-"):-len(".json")] for p in path.parent.glob("catalogue-*.json"))
            raise DripleError(f"no shipped catalogue for setting {path.name[10:-5]!r}; shipped: {', '.join(shipped)}")
    path = Path(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise DripleError(f"cannot read the job catalogue {path}: {err.strerror}") from None
    except ValueError as err:
        raise DripleError(f"{path} is not a JSON catalogue: {err}") from None
    if data.get("format") != FORMAT:
        raise DripleError(f"{path} is not a {FORMAT} file (format {data.get('format')!r})")
    setting = data["setting"]
    jobs = [CatalogueJob(job_id=j["job_id"], name=j["name"],
                         measured=_profile(setting, j["name"], j["measured"], j.get("resident")),
                         predicted=_profile(setting, j["name"], j["predicted"], j.get("resident")),
                         split=j.get("split"))
            for j in data["jobs"]]
    if not jobs:
        raise DripleError(f"{path} holds no jobs")
    return Catalogue(setting=setting, jobs=jobs, capacity=dict(data["capacity"]), source=data.get("source", ""))


def build_catalogue(dataset: str | os.PathLike, out: str | os.PathLike, inspector: str | None = None) -> Catalogue:
    """Measured rows of ``dataset`` and their predictions by ``inspector`` (default: the shipped
    inspector of the dataset's setting) into the catalogue file ``out``."""
    from driple.inspector.dataset import job_config, read_results
    from driple.metrics import target_names
    from driple.predict.predictor import Predictor
    from driple.settings import parse_setting

    dataset = Path(dataset)
    rows = read_results(str(dataset / "results.csv"))
    if rows.empty:
        raise DripleError(f"no ok job in {dataset}")
    setting = str(rows["setting"].iloc[0])
    predictor = Predictor.load(inspector or setting)
    resident = predictor.resident
    splits = job_splits(predictor)
    try:
        with open(dataset / "provenance.json") as f:
            host = json.load(f)["host"]
        cores, memory_mb = float(host["cores"]), float(host["memory_bytes"]) / 1e6
    except (OSError, ValueError, KeyError) as err:
        raise DripleError(f"{dataset}/provenance.json does not give the host's cores and memory: {err}") from None
    workers = parse_setting(setting).workers
    jobs = []
    for _, row in rows.iterrows():
        cfg = job_config(row.to_dict())
        name = f"{cfg['model']} bs{cfg['batch_size']} {cfg['optimizer']}"
        prof = predictor.predict_job(cfg["model"], batch_size=cfg["batch_size"], optimizer=cfg["optimizer"],
                                     knobs=cfg["knobs"])
        jobs.append({"job_id": str(row["job_id"]), "name": name, "config": cfg,
                     "measured": {m: float(row[m]) for m in target_names()},
                     "predicted": {m: float(prof.metrics[m]) for m in target_names()},
                     "resident": resident, "split": splits.get(str(row["job_id"]))})
    data = {"format": FORMAT, "setting": setting, "source": str(dataset),
            "inspector": inspector or setting,
            "capacity": {"compute": 100.0 * cores / workers, "memory": memory_mb / workers},
            "jobs": jobs}
    Path(out).write_text(json.dumps(data, indent=1) + "\n")
    return load_catalogue(out)
