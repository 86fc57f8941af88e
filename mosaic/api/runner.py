"""``mosaic.run``: run an experiment from Python, as ``mosaic experiment-start`` does."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

from mosaic.api.execution import execute, join_cluster, open_results
from mosaic.api.progress import ProgressDisplay
from mosaic.api.results import Results, RunRecord
from mosaic.experiment import Experiment, experiment_from_data, load_experiment
from mosaic.orchestration.executor import RunResult

__all__ = ["run"]

# What an Experiment holds beyond the file's keys: not data to override.
_RESOLVED = {"source", "store_path", "store_url", "curve_keys_dir", "points", "overrides"}


def run(experiment: str | os.PathLike[str] | Experiment | Mapping[str, Any], /, *,
        jobs: int | None = None, progress: bool | None = None, ray: str | None = None,
        **overrides: Any) -> Results:
    """Run ``experiment`` and return its :class:`~mosaic.api.results.Results`.

    ``experiment`` is an experiment file's path, an :class:`~mosaic.experiment.Experiment`
    from :func:`~mosaic.load_experiment`, or a mapping with what a file would hold (read as the
    file ``<uid>.yml`` in the current folder: the default store is ``<uid>.sqlite`` there).

    ``overrides`` replace keys of the file, as if written there: ``seed=3``, ``episodes=50``,
    ``store="x.sqlite"`` or ``store="postgresql://..."`` (the command's ``--store``: a relative
    path from the current folder), ``store={"path": "x.sqlite"}`` (a mapping replaces the whole
    section), ``sweep={...}``
    (or ``sweep=None`` to run without the file's sweep), and nested keys by their key path,
    dots between keys and numbers for list items:
    ``**{"agents.0.params.learning_rate": 0.01}``. A relative ``store.path`` resolves against
    the file's folder. ``jobs`` runs that many runs at once (``None``: one on this machine,
    every run on a Ray cluster); ``progress`` shows a bar per
    active run on stderr (``None``: only on a terminal or in a notebook; ``False``: never;
    ``True``: always, as plain lines where bars cannot be drawn). ``ray`` (``"auto"`` or a
    Ray address) runs each run as a task on that Ray cluster, as ``--ray`` does.

    The runs go through the same orchestration, store and ordered shutdown as
    ``mosaic experiment-start``; a run that fails does not raise (see ``Results.ok`` and each
    run's ``status`` and ``error``). Ctrl-C (SIGINT in the main thread) cancels the runs in
    order, stores every step taken, and raises KeyboardInterrupt once nothing of them is left
    running; a second Ctrl-C kills their component processes first. SIGTERM cancels the same
    way, then is handed to the handler that was in place before.

    Raises :class:`~mosaic.core.errors.ConfigError` for an invalid experiment or override
    (with the key path, as the command prints it) and
    :class:`~mosaic.core.errors.StoreError` for a store that cannot be opened or fails, and
    :class:`~mosaic.runtime.ray_support.RayMissing` when the runs need Ray and it is missing,
    and :class:`~mosaic.core.errors.ClusterTooSmall` when a run asks more than any node of
    the cluster has.
    """
    loaded = _experiment(experiment, overrides)
    join_cluster(loaded, ray)
    display = ProgressDisplay(loaded.run_count) if progress is not False else None
    if display is not None and progress is None and not display.live:
        display = None  # plain lines only when asked for
    writer = open_results(loaded)

    def ended(result: RunResult) -> None:
        if display is not None:
            display.run_ended(result.index)

    try:
        execution = execute(loaded, writer, jobs=jobs,
                            on_progress=display.update if display is not None else None,
                            on_run_end=ended, exit_at_once=False, ray=ray)
    finally:
        if display is not None:
            display.close()
    if execution.cancelled_by == signal.SIGINT:
        raise KeyboardInterrupt
    if execution.cancelled_by is not None:
        os.kill(os.getpid(), execution.cancelled_by)
    return Results(loaded.uid, [RunRecord.from_result(r) for r in execution.results],
                   execution.store)


def _experiment(experiment: str | os.PathLike[str] | Experiment | Mapping[str, Any],
                overrides: Mapping[str, Any]) -> Experiment:
    """The experiment to run: loaded, validated, with ``overrides`` set. A ``store`` given as
    a path or URL is the command's ``--store``; a mapping replaces the file's section."""
    store = overrides.get("store")
    store_override: str | None = None
    if isinstance(store, str | os.PathLike):
        store_override = os.fspath(store)
        overrides = {key: value for key, value in overrides.items() if key != "store"}
    if isinstance(experiment, Experiment):
        if not overrides and store_override is None:
            return experiment
        data = experiment.model_dump(by_alias=True, exclude_unset=True, exclude=_RESOLVED)
        # Those set before hold in data already; set again, they stay on the record.
        changed = experiment_from_data(data, source=experiment.source,
                                       store_override=store_override,
                                       overrides={**experiment.overrides, **overrides})
        if store_override is not None or any(path.split(".")[0] == "store"
                                             for path in overrides):
            return changed
        # The store it was loaded with (a --store-like override included) stays.
        return changed.model_copy(update={"store_path": experiment.store_path,
                                          "store_url": experiment.store_url})
    if isinstance(experiment, Mapping):
        return experiment_from_data(experiment, store_override=store_override,
                                    overrides=overrides)
    if isinstance(experiment, str | os.PathLike):
        return load_experiment(experiment, store_override=store_override, overrides=overrides)
    raise TypeError("run() takes an experiment file's path, an Experiment or a mapping, got "
                    f"{type(experiment).__name__}")
