"""A shipped inspector's kept held-out predictions joined to a roofline again, without retraining
its network: what the memory durations' held-out step (:func:`driple.evaluation.memory.held_out_steps`)
and ``scripts/rejoin_roofline.py`` both read."""
from __future__ import annotations

from typing import Optional, Sequence

from driple.errors import DripleError


def shipped_rejoin(setting: str, folds: Sequence[dict], datasets_root: str, models_root: Optional[str] = None,
                   overlap: bool = True, terms: str = "all", messages: Optional[bool] = None) -> tuple:
    """``(dataset, [[n_test, targets] per fold])``: the shipped ``setting`` inspector's network
    predictions an evaluation kept (``folds``), each fold joined to a roofline fitted on its
    training jobs (:func:`driple.inspector.roofline_estimator.rejoin`), on the setting's dataset
    as that inspector builds it; with the message term where the shipped roofline has it
    (``messages`` None) or as told. A :class:`~driple.errors.DripleError` when the inspector has no
    roofline."""
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.dataset import dataset_built_as
    from driple.inspector.roofline_estimator import rejoin
    from driple.predict.registry import resolve
    from driple.setting_datasets import SettingDatasets

    inspector = load_inspector(str(resolve(setting, root=models_root)[0]))
    if inspector.roofline is None:
        raise DripleError(f"the shipped {setting} inspector has no roofline to join again")
    dataset = dataset_built_as(inspector, SettingDatasets.load(datasets_root).dataset_dir(setting))
    if messages is None:
        messages = inspector.roofline.messages
    return dataset, rejoin(dataset, folds, inspector.roofline.host, overlap=overlap, terms=terms, messages=messages)
