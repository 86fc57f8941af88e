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

from mosaic.core.errors import StoreLost
from mosaic.experiment import Experiment
from mosaic.orchestration.executor import Executor, ProgressCallback, RunResult
from mosaic.store import StoreWriter
from mosaic.store.resume import StoredExperiment
from mosaic.tracking import tracked

__all__ = ["CLOSE_TIMEOUT_S", "Execution", "execute", "join_cluster", "open_results"]

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
    #: The store was lost under the runs (see StoreWriter): where the records not written are.
    store_lost: StoreLost | None = None


def open_results(experiment: Experiment) -> StoreWriter:
    """Open (creating if need be) the experiment's results store and start its writer.

    With ``tracking:`` (or :meth:`~mosaic.experiment.Experiment.with_tracking`), what is
    returned is the writer behind a tee that logs the runs to TensorBoard and MLflow as well
    (:func:`mosaic.tracking.tracked`); closing it closes both.

    Raises :class:`~mosaic.core.errors.StoreError` if it cannot be opened, and
    :class:`~mosaic.core.errors.MissingExtra` if a tracking sink's extra is missing; nothing
    has started then.
    """
    writer = StoreWriter(experiment.store_target, outage_s=experiment.store.outage_s)
    writer.start()
    try:
        return tracked(writer, experiment.uid, tensorboard=experiment.tensorboard_dir,
                       mlflow=experiment.mlflow_uri)
    except BaseException:
        writer.close()
        raise


def join_cluster(experiment: Experiment, ray: str | None = None) -> str | None:
    """Join the Ray cluster the runs need, if any: at ``ray`` (``--ray``), else at the file's
    ``executor: {ray: {address}}``, else the local one (``auto``) where some component has
    ``placement: ray``; return its address (``None``: the runs need none).

    Call it before anything starts: raises :class:`~mosaic.runtime.ray_support.RayMissing`
    (which extra to install), :class:`~mosaic.core.errors.ClusterTooSmall` (a run, or a
    ``placement: ray`` component, asks more than any alive node of the cluster has: see
    :func:`~mosaic.orchestration.ray_fit.check_fits`) or
    :class:`~mosaic.core.errors.MosaicError` (the cluster cannot be reached).
    """
    settings = experiment.executor.ray
    address = ray or (settings.address if settings is not None else None)
    if address is None and "ray" in experiment.placements():
        address = "auto"
    if address is not None:
        from mosaic.orchestration.ray_fit import check_fits
        from mosaic.runtime.ray_support import connect

        check_fits(connect(address), experiment,
                   runs=ray is not None or (settings is not None and settings.runs))
    return address


def execute(experiment: Experiment, writer: StoreWriter, *, jobs: int | None = None,
            on_progress: ProgressCallback | None = None,
            on_run_end: Callable[[RunResult], None] | None = None,
            exit_at_once: bool = True, ray: str | None = None,
            resume: StoredExperiment | None = None) -> Execution:
    """Run every run of ``experiment``, ``jobs`` at a time, recording them through ``writer``
    (``None``: one at a time on this machine, every run at once on a Ray cluster).

    The first SIGINT or SIGTERM (in the main thread) cancels: active runs shut down in order,
    later ones do not start, and the result says which signal it was; a second SIGINT kills
    every component process, and exits the process at once with ``exit_at_once`` (see
    :class:`~mosaic.orchestration.executor.Executor`). With ``ray`` (a Ray address, or
    ``auto``), or the file's ``executor: {ray: ...}``, each run is a task on that Ray cluster
    (see :mod:`mosaic.orchestration.ray_runs`; call :func:`join_cluster` first). ``writer``
    is closed before this returns or raises, within :data:`CLOSE_TIMEOUT_S`. Raises
    :class:`~mosaic.core.errors.StoreError` when the database fails under the runs; what was
    committed before stays. A store lost under the runs (it refused every write for
    ``store.outage_s``, or its disk is full) fails the runs then active, starts no other, and
    is in the result's ``store_lost``, which names the spill file that holds what was not
    written. With ``resume`` (see :func:`mosaic.api.resuming.plan_resume`) the runs of that
    stored experiment that finished are not run again, and every other continues in its own
    row.
    """
    lost: StoreLost | None = None
    try:
        executor = Executor(experiment, writer, on_progress=on_progress, on_run_end=on_run_end,
                            jobs=jobs, exit_at_once=exit_at_once, ray=ray, resume=resume)
        results = executor.execute()
    finally:
        try:
            # The store may be in an outage: it gets that long to come back before it is lost.
            writer.close(writer.outage_s + CLOSE_TIMEOUT_S)
        except StoreLost as error:
            lost = error
    return Execution(results, executor.cancelled_by, experiment.store_target, lost)
