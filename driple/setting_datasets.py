"""Which measured dataset stands for each setting, and on which CPU model it was measured.

The hardware is part of a setting: rows measured on another CPU model are another setting, so
one dataset holds one CPU model. Datasets measured on one host live together in a *collection*
directory (``datasets/v2/`` on the AMD EPYC host, ``datasets/v2-intel/`` on the Intel Xeon one),
with a setting's retest (``<dataset>-retest``) and co-runs (``corun-<setting>``) beside it.
``datasets/settings.json`` names the dataset each shipped inspector is trained and evaluated
on, with its CPU model::

    {"format": "driple-setting-datasets",
     "settings": {"cpu-ps-p1w2-1g": {"dataset": "v2-intel/cpu-ps-p1w2-1g",
                                     "cpu_model": "Intel(R) Xeon(R) Processor"}, ...}}

A directory without that file is read flat: the dataset of setting ``S`` is ``<root>/S``.
``scripts/ship_inspectors.py`` and ``scripts/reproduce.py`` read datasets through this module.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from driple.errors import DripleError

INDEX_FILE = "settings.json"
INDEX_FORMAT = "driple-setting-datasets"


def cpu_models(frame, unnamed: str | None = None) -> list[str]:
    """The CPU models the rows of a results table (``cpu_model`` column) name, sorted; rows
    naming none count as ``unnamed`` when given, else are skipped. [] without the column."""
    if frame is None or "cpu_model" not in frame:
        return []
    column = frame["cpu_model"]
    column = column.fillna(unnamed) if unnamed is not None else column.dropna()
    return sorted(set(column.astype(str)))


@dataclass
class SettingDatasets:
    """The datasets under ``root``: ``entries`` maps a setting id to ``{"dataset": path
    relative to root, "cpu_model": ...}``; empty for a flat directory."""

    root: str
    entries: dict = field(default_factory=dict)

    @classmethod
    def load(cls, root: str | os.PathLike) -> "SettingDatasets":
        root = os.path.abspath(os.fspath(root))
        if not os.path.isdir(root):
            raise DripleError(f"no datasets directory at {root}")
        path = os.path.join(root, INDEX_FILE)
        if not os.path.exists(path):
            return cls(root)
        try:
            with open(path) as f:
                index = json.load(f)
            if index.get("format") != INDEX_FORMAT:
                raise ValueError(f"its format is {index.get('format')!r}, not {INDEX_FORMAT!r}")
            entries = dict(index["settings"])
            for setting, entry in entries.items():
                if not isinstance(entry.get("dataset"), str):
                    raise ValueError(f"setting {setting!r} names no dataset")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise DripleError(f"{path} is not a readable setting index ({err}); restore it from "
                              "the repository") from None
        from driple.settings import parse_setting

        for setting in entries:
            parse_setting(setting)  # an unknown setting id is a clear error here, not later
        return cls(root, entries)

    @property
    def indexed(self) -> bool:
        return bool(self.entries)

    def dataset_dir(self, setting: str) -> str:
        """The dataset measured for ``setting``."""
        entry = self.entries.get(setting)
        if entry is None:
            if self.indexed:
                raise DripleError(f"{os.path.join(self.root, INDEX_FILE)} names no dataset for "
                                  f"{setting}; it has {', '.join(sorted(self.entries))}")
            return os.path.join(self.root, setting)
        return os.path.normpath(os.path.join(self.root, entry["dataset"]))

    def corun_dir(self, setting: str) -> str:
        """Where the co-runs of ``setting`` are: ``corun-<setting>`` beside its dataset."""
        return os.path.join(os.path.dirname(self.dataset_dir(setting)), f"corun-{setting}")

    def cpu_model(self, setting: str) -> str | None:
        return (self.entries.get(setting) or {}).get("cpu_model")

    def settings(self) -> list[str]:
        """The indexed settings; for a flat directory, every subdirectory named like a setting
        that holds a ``results.csv``."""
        if self.indexed:
            return list(self.entries)
        from driple.settings import parse_setting

        found = []
        for name in sorted(os.listdir(self.root)):
            if not os.path.exists(os.path.join(self.root, name, "results.csv")):
                continue
            try:
                parse_setting(name)
            except DripleError:
                continue  # a retest, co-run or other dataset
            found.append(name)
        return found

    def collections(self) -> list[str]:
        """Directories holding the datasets of the settings (the root itself when flat)."""
        if not self.indexed:
            return [self.root]
        return sorted({os.path.dirname(self.dataset_dir(s)) for s in self.entries})

    def check_cpu_models(self) -> list[str]:
        """Problems with the index's CPU models: a dataset holding rows of another CPU model
        than its entry names (or of several). Empty when every dataset holds its own."""
        from driple.csvtable import read_csv

        problems = []
        for setting, entry in self.entries.items():
            path = os.path.join(self.dataset_dir(setting), "results.csv")
            if not os.path.exists(path):
                problems.append(f"{setting}: no {path}")
                continue
            table = read_csv(path).drop_duplicates("job_id", keep="last")  # a re-run job: its last row
            ok = table[table["status"] == "ok"]
            found = cpu_models(ok, unnamed="?") if "cpu_model" in ok else ["?"]
            if found != [entry.get("cpu_model")]:
                problems.append(f"{setting}: the index says {entry.get('cpu_model')!r}, "
                                f"{path} holds {', '.join(map(repr, found)) or 'no ok rows'}")
        return problems
