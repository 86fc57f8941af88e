"""``--resume``: find the experiment a store holds for a file, and check it may be continued.

:func:`plan_resume` is what ``mosaic experiment-start FILE --store S --resume`` asks before it
runs anything; the :class:`~mosaic.orchestration.executor.Executor` then skips the runs that
finished and continues every other in its own row (see :mod:`mosaic.store.resume`).
"""

from __future__ import annotations

from typing import Any

import yaml

from mosaic.core.errors import ConfigError, MosaicError
from mosaic.core.run_states import RunStatus
from mosaic.experiment import Experiment
from mosaic.experiment.schema import OVERRIDES_MARK
from mosaic.orchestration.executor import run_uids
from mosaic.store import StoreWriter
from mosaic.store.resume import StoredExperiment, file_hash

__all__ = ["NothingToResume", "plan_resume"]

#: The most differences between two files an error lists.
_SHOWN_CHANGES = 5


class NothingToResume(MosaicError):
    """The store holds no run of the experiment left to continue (the message says why)."""


def plan_resume(experiment: Experiment, writer: StoreWriter) -> StoredExperiment:
    """The stored experiment that ``experiment`` (its file) continues.

    Raises :class:`NothingToResume` if the store holds no resumable experiment of this uid, or
    every one of its runs finished; :class:`~mosaic.core.errors.ConfigError` if the file is not
    the one the experiment was started with (naming what changed), or a run of it is still
    running in another command on this host; StoreError as the writer does.
    """
    shown = experiment.store_shown
    if experiment.search is not None:
        raise ConfigError(str(experiment.source), "sweep.search", "a search cannot be resumed: "
                          "its points depend on every run before them",
                          "start it anew without --resume")
    stored = writer.find_experiment(experiment.uid)
    if stored is None:
        raise NothingToResume(f"nothing to resume: {shown} holds no experiment "
                              f"{experiment.uid!r} that can be resumed")
    source = str(experiment.source)
    try:
        text = experiment.recorded_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(source, "", f"cannot be read again: {error}") from None
    if file_hash(text) != stored.hash:
        raise ConfigError(
            source, "", f"is not the file experiment {experiment.uid!r} was started with: "
            + "; ".join(changes(stored.text, text)),
            "restore the file to resume, or start it anew without --resume")
    for run in stored.runs.values():
        if run.alive_here():
            raise ConfigError(source, "", f"run {run.uid} is still running (process {run.pid} "
                              "on this host)", "stop that command before resuming")
    uids = run_uids(experiment, stored.run_prefix)
    if all(stored.runs.get(uid) is not None and stored.runs[uid].status == RunStatus.FINISHED
           for uid in uids):
        raise NothingToResume(f"nothing to resume: every run of experiment "
                              f"{experiment.uid!r} in {shown} finished")
    return stored


def changes(old: str, new: str) -> list[str]:
    """What differs between two experiment files, key path by key path (at most a few)."""
    try:
        before, after = yaml.safe_load(old), yaml.safe_load(new)
    except yaml.YAMLError:
        return ["its text differs"]
    found: list[str] = []
    _diff(before, after, "", found)
    set_before, set_after = _overrides_in(old), _overrides_in(new)
    if set_before != set_after:
        found.append(f"the overrides (--set) were {', '.join(set_before) or 'none'}, now "
                     f"{', '.join(set_after) or 'none'}")
    if not found:
        return ["its text differs (comments or layout only)"]
    shown = found[:_SHOWN_CHANGES]
    if len(found) > _SHOWN_CHANGES:
        shown.append(f"and {len(found) - _SHOWN_CHANGES} more")
    return shown


def _overrides_in(text: str) -> list[str]:
    """The overrides an experiment's recorded text lists (see Experiment.recorded_text)."""
    _, mark, listed = text.partition(OVERRIDES_MARK)
    return [line.strip("# ").strip() for line in listed.splitlines() if line.strip()] if mark \
        else []


def _diff(before: Any, after: Any, path: str, found: list[str]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in list(before) + [k for k in after if k not in before]:
            where = f"{path}.{key}" if path else str(key)
            if key not in after:
                found.append(f"{where} was removed")
            elif key not in before:
                found.append(f"{where} was added")
            else:
                _diff(before[key], after[key], where, found)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            _diff(old, new, f"{path}[{index}]", found)
    elif before != after:
        found.append(f"{path or 'the file'}: {before!r} -> {after!r}")
