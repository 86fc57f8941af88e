"""What the store writer's thread keeps: its statistics, the entries of its backlog, and the
attributes the halves of :class:`~mosaic.store.writer.StoreWriter` share (see
:mod:`mosaic.store._writer_thread`)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from mosaic.core.errors import StoreError, StoreLost
from mosaic.store._batch import Batch
from mosaic.store._outage import Outage
from mosaic.store._spill import SpillFile
from mosaic.store.url import StoreLocation, describe_error

# The logger keeps the name of the public module, where this code used to live.
log = logging.getLogger("mosaic.store.writer")


@dataclass(frozen=True)
class WriterStats:
    """What the writer thread has done so far (exact; read from any thread)."""

    steps_written: int = 0
    episodes_written: int = 0
    metrics_written: int = 0
    transitions_written: int = 0
    runs_finished: int = 0
    transactions: int = 0
    rows_dropped: int = 0
    errors: int = 0
    #: Failed writes that were kept and tried again, and the records sent to the spill file.
    retries: int = 0
    rows_spilled: int = 0


@dataclass
class PendingCall:
    """A synchronous call waiting in the backlog."""

    fn: Callable[[sa.Connection], Any]
    result: Future[Any]
    what: str
    started: bool = False


@dataclass
class SpilledRecords:
    """Records in the spill file between two offsets, not yet in the store."""

    start: int
    end: int
    rows: int
    tried: bool = False


@dataclass
class GivenRows:
    """What a run gave the writer: step, episode and metric rows."""

    steps: int = 0
    episodes: int = 0
    metrics: int = 0


class WriteFailed(Exception):
    """A write the store did not take now; the backlog keeps it."""

    def __init__(self, kind: str, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.kind = kind
        self.exc = exc


class WriterState:
    """The attributes of a store writer, set by ``StoreWriter``'s constructor and its thread's
    start: the queue, the events, the pending error, the loss and the stats are shared with the
    caller side (the error, the loss and the stats under ``_lock``), the rest is the thread's
    own."""

    _location: StoreLocation
    _flush_interval: float
    _outage_s: float
    _buffer_rows: int
    _queue: deque[tuple[int, Any]]
    _wake: threading.Event
    _ready: threading.Event
    _lock: threading.Lock
    _startup_error: StoreError | None
    _error: StoreError | None
    _lost: StoreLost | None
    _lost_why: str
    _lost_listeners: list[Callable[[StoreLost], None]]
    _pending_rows: int
    _stats: WriterStats
    _active_runs: set[int]
    _run_uids: dict[int, str]
    # The thread's own, set as it starts.
    _backlog: deque[Batch | SpilledRecords | PendingCall | Future[None]]
    _memory_rows: int
    _spill: SpillFile | None
    _spilling: bool
    _for_spill: list[tuple[int, Any]]
    _outage: Outage | None
    _writer_key: str

    @property
    def location(self) -> str:
        """The store's file path or URL (password hidden)."""
        return self._location.describe()

    def _record_error(self, exc: BaseException, context: str, dropped: int = 0) -> None:
        error = StoreError(f"{context}: {describe_error(exc, self._location.url)}")
        error.__cause__ = exc
        with self._lock:
            s = self._stats
            self._stats = bump(s, rows_dropped=s.rows_dropped + dropped, errors=s.errors + 1)
            first = self._error is None
            if first:
                self._error = error
        if first:
            log.error("store %s: %s", self.location, error)
        else:
            log.debug("store %s: %s", self.location, error)


def bump(stats: WriterStats, **changes: int) -> WriterStats:
    return WriterStats(**{**stats.__dict__, **changes})
