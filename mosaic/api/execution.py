"""Running an experiment's runs with a results store: the one path ``mosaic experiment-start``
and :func:`mosaic.run` share.

:func:`open_results` opens the store (before anything starts, so that a bad store is the
caller's input error), and :func:`execute` runs every run through an
:class:`~mosaic.orchestration.executor.Executor` and closes the store, whatever happens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mosaic.experiment import Experiment
from mosaic.orchestration.executor import Executor, ProgressCallback, RunResult
from mosaic.store import StoreWriter

__all__ = ["CLOSE_TIMEOUT_S", "Execution", "execute", "open_results"]

#: Time the store gets to commit what is left once the runs are over.
CLOSE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Execution:
    """What :func:`execute` did: each run's result in run order (a run cancelled before it
    started is absent), the signal that cancelled the runs (``None`` if none did), and the
    store they are recorded in (a SQLite file, or a database's URL)."""

    results: list[RunResult]
    cancelled_by: int | None
    store: Path | str


def open_results(experiment: Experiment) -> StoreWriter:
    """Open (creating if need be) the experiment's results store and start its writer.

    Raises :class:`~mosaic.core.errors.StoreError` if it cannot be opened; nothing has started
    then.
    """
    writer = StoreWriter(experiment.store_target)
    writer.start()
    return writer


def execute(experiment: Experiment, writer: StoreWriter, *, jobs: int = 1,
            on_progress: ProgressCallback | None = None,
            on_run_end: Callable[[RunResult], None] | None = None,
            exit_at_once: bool = True) -> Execution:
    """Run every run of ``experiment``, ``jobs`` at a time, recording them through ``writer``.

    The first SIGINT or SIGTERM (in the main thread) cancels: active runs shut down in order,
    later ones do not start, and the result says which signal it was; a second SIGINT kills
    every component process, and exits the process at once with ``exit_at_once`` (see
    :class:`~mosaic.orchestration.executor.Executor`). ``writer`` is closed before this returns
    or raises, within :data:`CLOSE_TIMEOUT_S`. Raises
    :class:`~mosaic.core.errors.StoreError` when the database fails under the runs; what was
    committed before stays.
    """
    try:
        executor = Executor(experiment, writer, on_progress=on_progress, on_run_end=on_run_end,
                            jobs=jobs, exit_at_once=exit_at_once)
        results = executor.execute()
    finally:
        writer.close(CLOSE_TIMEOUT_S)
    return Execution(results, executor.cancelled_by, experiment.store_target)
