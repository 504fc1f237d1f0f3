"""Where a reproduction reads and writes (:class:`Context`: datasets, work dir, output), and
how its JSON is stamped with the run's command and date.
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np

from driple.zoo.workload import checkout_root


ROOT = str(checkout_root())  # the checkout this package is installed from (editable install)


class Context:
    """Where things are: datasets (read), work dir (graphs), output (JSON, results.md)."""

    def __init__(self, args):
        from driple.predict.registry import models_dir

        self.args = args
        from driple.setting_datasets import SettingDatasets

        self.datasets = os.path.abspath(args.datasets_dir)
        self.index = SettingDatasets.load(self.datasets)
        self.models = os.path.abspath(args.models_dir) if args.models_dir else str(models_dir())
        self.out = os.path.abspath(args.out) if args.out else os.path.join(self.models, "evaluation")
        self.work = os.path.abspath(args.work_dir) if args.work_dir else None
        self.cache: dict = {}  # trainings shared between settings (a source's family folds)
        self.copied: set = set()  # settings copied to the work dir in this run (one snapshot each)

    def dataset_dir(self, setting: str) -> str:
        return self.index.dataset_dir(setting)

    def dataset(self, setting: str, builder: dict, root: str | None = None):
        """The inspector dataset of ``setting`` (at ``root``, default its directory under the
        datasets) built with ``builder`` options (in the work dir)."""
        from driple.inspector.dataset import InspectorDataset

        root = root or self.dataset_dir(setting)
        if not os.path.exists(os.path.join(root, "results.csv")):
            from driple.errors import DripleError

            raise DripleError(f"no dataset for {setting} at {root}")
        graph_cache = self.args.graph_cache
        if self.work:
            name = os.path.basename(os.path.normpath(root))
            copy = os.path.join(self.work, "datasets", name)
            if name not in self.copied:  # a dataset still being written: one snapshot per run
                os.makedirs(copy, exist_ok=True)
                for file in ("results.csv", "provenance.json"):
                    if os.path.exists(os.path.join(root, file)):
                        shutil.copy2(os.path.join(root, file), os.path.join(copy, file))
                self.copied.add(name)
            root = copy
            graph_cache = graph_cache or os.path.join(self.work, "datasets", ".graph-cache")
        return InspectorDataset(root, groups=builder.get("groups", 100),
                                grouping=builder.get("grouping", "uniform"),
                                features=builder.get("features", "driple"),
                                seed=builder.get("seed", 42), workers=self.args.build_workers,
                                graph_cache=graph_cache, progress=not self.args.quiet)

    def inspector(self, setting: str):
        from driple.inspector.checkpoint import load_inspector
        from driple.predict.registry import resolve

        path, _ = resolve(setting, root=self.models_root())
        return load_inspector(str(path))

    def settings(self) -> list[str]:
        """Settings with a shipped inspector and a dataset (``--settings`` limits them)."""
        from driple.predict.registry import list_settings

        shipped = [e["setting"] for e in list_settings(self.models_root())]
        chosen = self.args.settings or shipped
        measured = set(self.index.settings())
        return [s for s in chosen if s in measured
                and os.path.exists(os.path.join(self.dataset_dir(s), "results.csv"))]

    def source_setting(self) -> str:
        from driple.predict.registry import load_registry

        return load_registry(self.models_root()).get("default")

    def models_root(self):
        from pathlib import Path

        return Path(self.models)

    def save(self, section: str, data: dict) -> None:
        os.makedirs(self.out, exist_ok=True)
        data = {"section": section, **run_stamp(), "datasets": shown_path(self.datasets), **data}
        with open(os.path.join(self.out, f"{section}.json"), "w") as f:
            json.dump(plain_json(data), f, indent=2)

    def load(self, section: str):
        path = os.path.join(self.out, f"{section}.json")
        return json.load(open(path)) if os.path.exists(path) else None

    def load_section(self, section: str):
        """What :meth:`save` wrote for ``section``, or None; a file of that name that another
        script wrote (no matching ``section`` key) is left out with a warning, not misread."""
        data = self.load(section)
        if data is not None and (not isinstance(data, dict) or data.get("section") != section):
            import sys

            print(f"warning: {os.path.join(self.out, section + '.json')} is not this reproduction's "
                  f"{section} section (another script's output?); the report leaves it out",
                  file=sys.stderr)
            return None
        return data

    def kept(self, section: str, key: str) -> dict:
        """Entries of an earlier run of ``section`` that this run does not redo (``--settings``)."""
        if not self.args.settings:
            return {}
        return {k: v for k, v in ((self.load(section) or {}).get(key) or {}).items()
                if k not in self.args.settings}

    def overrides(self) -> dict:
        a = self.args
        return {k: v for k, v in (("epochs", a.epochs), ("patience", a.patience),
                                  ("target_scaling", a.target_scaling)) if v is not None}


def shown_path(path: str) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    return os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path


def plain_json(obj):
    if isinstance(obj, dict):
        return {str(k): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_json(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return plain_json(obj.tolist())
    if isinstance(obj, str) and obj.startswith(ROOT + os.sep):
        return shown_path(obj)  # paths in the repository as the reports show them
    return obj


def say(text: str) -> None:
    print(text, flush=True)


#: The arguments this run was given (``main``'s ``argv``, else the command line's).
ARGV: list[str] | None = None
#: How this run was called, after ``python``: the JSON's ``command`` starts with it.
PROG = "scripts/reproduce.py"


def run_stamp() -> dict:
    """This run's command and date, kept in each entry of a section: with ``--settings`` the
    entries of other settings stay from earlier runs, and say which."""
    from driple.collect.provenance import script_stamp

    import sys

    stamp = script_stamp("reproduce.py", ARGV, host=False)
    return {**stamp, "command": " ".join(["python", PROG, *(sys.argv[1:] if ARGV is None else ARGV)])}


def cpu_models_text(frame) -> str | None:
    from driple.setting_datasets import cpu_models

    return ", ".join(cpu_models(frame)) or None


def section_files(out: str, section: str) -> list[str]:
    """A section's JSON files per setting in ``out`` (``<section>-<setting>.json``), by name."""
    import glob

    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(out), f"{section}-*.json")))
