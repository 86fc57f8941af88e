"""Tracking: each run logged to TensorBoard and MLflow too, as it runs, besides the store.

An experiment asks for it with ``tracking: {tensorboard: DIR, mlflow: URI}`` (or
``--tensorboard`` and ``--mlflow``); :func:`tracked` then puts a tee in front of the store
writer (:mod:`mosaic.tracking.tee`), which hands copies of what the runs record to the sinks
(:mod:`mosaic.tracking.tensorboard_sink`, :mod:`mosaic.tracking.mlflow_sink`) on a thread of
their own (:mod:`mosaic.tracking.dispatch`). The store records the same with tracking or
without, and a sink that fails is turned off with a warning: the runs go on.

Each sink needs its extra (``pip install 'mosaic[tensorboard]'``, ``'mosaic[mlflow]'``):
:func:`require_sink` says which, before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mosaic.tracking.sink import Sink
from mosaic.tracking.targets import SINKS, mlflow_uri, require_sink, tensorboard_folder

if TYPE_CHECKING:
    from mosaic.store.writer import StoreWriter

__all__ = ["SINKS", "mlflow_uri", "require_sink", "tensorboard_folder", "tracked"]


def tracked(writer: StoreWriter, experiment: str, *, tensorboard: Path | None = None,
            mlflow: str | None = None) -> StoreWriter:
    """``writer`` (started) with the runs of ``experiment`` (its uid) also logged to TensorBoard
    under the folder ``tensorboard`` and to MLflow at the tracking URI ``mlflow``: a
    :class:`~mosaic.tracking.tee.TrackingTee` in front of it; ``writer`` itself when neither is
    given. Raises :class:`~mosaic.core.errors.MissingExtra` when a sink's extra is missing."""
    sinks: list[Sink] = []
    if tensorboard is not None:
        require_sink("tensorboard")
        from mosaic.tracking.tensorboard_sink import TensorBoardSink

        sinks.append(TensorBoardSink(tensorboard))
    if mlflow is not None:
        require_sink("mlflow")
        from mosaic.tracking.mlflow_sink import MLflowSink

        sinks.append(MLflowSink(mlflow, experiment))
    if not sinks:
        return writer
    from mosaic.tracking.tee import TrackingTee

    return TrackingTee(writer, sinks, experiment)
