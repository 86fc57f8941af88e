"""The TensorBoard sink: one run folder of event files per mosaic run, through tensorboardX.

``<folder>/<run uid>/`` holds the run's scalars (see :mod:`mosaic.tracking.tee`), each against
the run's env steps, with the time it was recorded as its wall time. tensorboardX writes the
files from a thread of its own and flushes them every :data:`FLUSH_S` seconds, so that a
TensorBoard watching the folder follows the runs; a run's files are flushed and closed when it
ends, and every open one when the sink closes.

A run that continues in its own row (another attempt, or ``--resume``) goes on in its folder
from its restart step: TensorBoard then hides what the folder held from that step on (the
event files' purge marker), so that its curves show the run as the store holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from mosaic.core.extras import TENSORBOARD, require
from mosaic.tracking.sink import Point, RunEnd, RunStart, Sink

__all__ = ["FLUSH_S", "TensorBoardSink"]

#: How often tensorboardX writes what it holds to a run's event file, in seconds.
FLUSH_S = 5


class TensorBoardSink(Sink):
    """Writes each run's scalars to ``folder / <run uid>`` (created when the run starts)."""

    name: ClassVar[str] = "TensorBoard"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._writers: dict[str, Any] = {}

    def start(self, run: RunStart) -> None:
        module = require("tensorboardX", "TensorBoard logging", TENSORBOARD)
        earlier = self._writers.pop(run.uid, None)
        if earlier is not None:  # another attempt: its files end here, the new ones purge
            earlier.close()
        self._writers[run.uid] = module.SummaryWriter(
            logdir=str(self.folder / run.uid), flush_secs=FLUSH_S,
            purge_step=run.steps if run.resumed else None)

    def scalars(self, run: str, points: Sequence[Point]) -> None:
        writer = self._writers.get(run)
        if writer is None:
            return
        for name, value, step, at in points:
            writer.add_scalar(name, value, global_step=step, walltime=at)

    def finish(self, run: RunEnd) -> None:
        writer = self._writers.pop(run.uid, None)
        if writer is not None:
            writer.close()

    def close(self) -> None:
        writers, self._writers = list(self._writers.values()), {}
        failed: Exception | None = None
        for writer in writers:  # each closed, whatever another does
            try:
                writer.close()
            except Exception as error:
                failed = failed or error
        if failed is not None:
            raise failed
