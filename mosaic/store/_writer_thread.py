"""The store writer's thread: it drains the queue into batches and commits each in one transaction.

:class:`WriterThreadMixin` is the half of :class:`~mosaic.store.writer.StoreWriter` that runs on
the writer thread and touches the database; the caller side in :mod:`mosaic.store.writer` only
enqueues and waits. A database error never escapes the thread: it is recorded once as the pending
error, which the caller's next synchronous call raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import schema
from mosaic.store._batch import (
    CALL,
    EPISODE,
    FINISH,
    FINISH_RUN,
    FLUSH,
    INSERT_TRANSITION,
    METRICS,
    STEPS,
    TRANSITION,
    Batch,
    MetricRow,
    StepRow,
    metric_param,
    step_params,
)
from mosaic.store._values import Encode
from mosaic.store.url import StoreLocation, describe_error, open_engine

_Param = TypeVar("_Param")

# The logger keeps the name of the public module, where this code used to live.
log = logging.getLogger("mosaic.store.writer")

# How often the writer refreshes ``runs.heartbeat_at`` of the runs it started and that are active.
HEARTBEAT_INTERVAL = 30.0


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


class WriterThreadMixin:
    """What :class:`~mosaic.store.writer.StoreWriter` does on its writer thread.

    :meth:`_main` is the thread's target. The attributes below are set by ``StoreWriter``'s
    constructor; the queue, the events, the pending error and the stats are shared with the
    caller side (the error and the stats under ``_lock``), the rest is the thread's own.
    """

    _location: StoreLocation
    _flush_interval: float
    _queue: deque[tuple[int, Any]]
    _wake: threading.Event
    _ready: threading.Event
    _lock: threading.Lock
    _startup_error: StoreError | None
    _error: StoreError | None
    _pending_rows: int
    _stats: WriterStats
    _active_runs: set[int]
    _steps_sql: str | None

    @property
    def location(self) -> str:
        """The store's file path or URL (password hidden)."""
        return self._location.describe()

    def _record_error(self, exc: BaseException, context: str, dropped: int = 0) -> None:
        error = StoreError(f"{context}: {describe_error(exc, self._location.url)}")
        error.__cause__ = exc
        with self._lock:
            s = self._stats
            self._stats = _bump(s, rows_dropped=s.rows_dropped + dropped, errors=s.errors + 1)
            first = self._error is None
            if first:
                self._error = error
        if first:
            log.error("store %s: %s", self.location, error)
        else:
            log.debug("store %s: %s", self.location, error)

    # -- writer thread -----------------------------------------------------------------------

    def _main(self, encode: Encode) -> None:
        engine: sa.Engine | None = None
        try:
            engine = open_engine(self._location, write=True)
            with engine.begin() as conn:
                schema.ensure_schema(conn)
            if self._location.is_sqlite:
                # The driver's executemany, on the statement SQLAlchemy compiles for this table,
                # is several times faster than Core's per-row parameter processing.
                compiled = sa.insert(schema.steps).compile(
                    dialect=engine.dialect, column_keys=list(schema.STEP_COLUMNS)
                )
                if tuple(compiled.positiontup or ()) != schema.STEP_COLUMNS:
                    raise StoreError("unexpected column order in the compiled steps insert")
                self._steps_sql = str(compiled)
        except Exception as exc:
            if engine is not None:
                engine.dispose()
            if isinstance(exc, StoreError):
                self._startup_error = exc
            else:
                self._startup_error = StoreError(
                    f"cannot open store {self.location}: {describe_error(exc, self._location.url)}"
                )
                self._startup_error.__cause__ = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop(engine, encode)
        except BaseException as exc:  # a defect here must still release every waiter
            log.exception("store %s: the writer thread failed", self.location)
            self._record_error(exc, "the store writer thread failed")
        finally:
            self._release_waiters()
            engine.dispose()

    def _loop(self, engine: sa.Engine, encode: Encode) -> None:
        next_heartbeat = time.monotonic() + HEARTBEAT_INTERVAL
        while True:
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            stop = self._drain(engine, encode)
            if stop:
                return
            if time.monotonic() >= next_heartbeat:
                next_heartbeat = time.monotonic() + HEARTBEAT_INTERVAL
                self._heartbeat(engine)

    def _drain(self, engine: sa.Engine, encode: Encode) -> bool:
        items = []
        queue = self._queue
        try:
            while True:
                items.append(queue.popleft())
        except IndexError:
            pass
        self._pending_rows = 0
        batch = Batch()
        flushed: list[Future[None]] = []
        stop = False
        for kind, payload in items:
            if kind == STEPS:
                params = self._step_params(payload, encode)
                if params:
                    batch.add(STEPS, params)
            elif kind == TRANSITION:
                batch.add(kind, payload)
            elif kind == EPISODE:
                episode = self._episode_params(payload)
                if episode is not None:
                    batch.add(kind, episode)
            elif kind == METRICS:
                metrics = self._metric_params(payload)
                if metrics:
                    batch.add(kind, metrics)
            elif kind == FINISH:
                self._active_runs.discard(payload["p_id"])
                batch.add(kind, payload)
            elif kind == CALL:
                # A synchronous call gets its own transaction so that its failure (say, a
                # duplicate run uid) is its caller's alone.
                self._commit(engine, batch)
                batch = Batch()
                self._run_call(engine, *payload)
            elif kind == FLUSH:
                flushed.append(payload)
            else:
                stop = True
        self._commit(engine, batch)
        for done in flushed:
            if done.set_running_or_notify_cancel():  # False: its caller stopped waiting
                done.set_result(None)
        return stop

    def _step_params(self, rows: Sequence[StepRow], encode: Encode) -> list[tuple[Any, ...]]:
        try:
            return step_params(rows, encode)
        except Exception:
            pass  # some row is bad: redo row by row below to keep the others
        return self._good_rows(rows, lambda row: step_params((row,), encode)[0], "step")

    def _metric_params(self, rows: Sequence[MetricRow]) -> list[dict[str, Any]]:
        return self._good_rows(rows, lambda row: metric_param(*row), "metric")

    def _good_rows(self, rows: Sequence[Any], convert: Callable[[Any], _Param],
                   what: str) -> list[_Param]:
        """``convert`` of each of ``rows`` that converts; the others reported once, with the
        first reason."""
        params = []
        bad: list[tuple[int, Exception]] = []
        for index, row in enumerate(rows):
            try:
                params.append(convert(row))
            except Exception as exc:
                bad.append((index, exc))
        if bad:
            index, first = bad[0]
            self._record_error(
                first,
                f"{len(bad)} of {len(rows)} {what} rows cannot be stored (first: row {index})",
                len(bad),
            )
        return params

    def _episode_params(self, payload: tuple[Any, ...]) -> dict[str, Any] | None:
        try:
            (run, env, ep, steps, total, returns, term, trunc, seed, copy, evaluation,
             snapshots) = payload
            return {
                "run_id": int(run),
                "environment": env,
                "episode": int(ep),
                "steps": int(steps),
                "total_return": None if total is None else float(total),
                "returns": {str(k): float(v) for k, v in dict(returns).items()},
                "terminated": bool(term),
                "truncated": bool(trunc),
                "seed": None if seed is None else int(seed),
                "copy": int(copy),
                "evaluation": bool(evaluation),
                "snapshots": None if snapshots is None else {
                    str(k): int(v) for k, v in dict(snapshots).items()},
            }
        except Exception as exc:
            self._record_error(exc, "an episode record cannot be stored", 1)
            return None

    def _commit(self, engine: sa.Engine, batch: Batch) -> None:
        if not batch.units:
            return
        try:
            with engine.begin() as conn:
                self._write(conn, batch)
        except sa.exc.IntegrityError as exc:
            if len(batch.units) == 1:
                self._record_error(exc, "a record violates a constraint", batch.rows())
                return
            # Retry item by item so that only the offending records are lost.
            for part in batch.split():
                try:
                    with engine.begin() as conn:
                        self._write(conn, part)
                except Exception as part_exc:
                    self._record_error(part_exc, "a record cannot be written", part.rows())
                else:
                    self._count(part)
        except Exception as exc:
            self._record_error(exc, f"writing {batch.rows()} records failed", batch.rows())
        else:
            self._count(batch)

    def _write(self, conn: sa.Connection, batch: Batch) -> None:
        # Runs and their children first, run ends last: a run is never seen finished without
        # the steps that were enqueued before its end.
        if batch.transitions:
            conn.execute(INSERT_TRANSITION, batch.transitions)
        if batch.steps:
            if self._steps_sql is not None:
                conn.exec_driver_sql(self._steps_sql, batch.steps)
            else:
                keys = schema.STEP_COLUMNS
                conn.execute(
                    sa.insert(schema.steps),
                    [dict(zip(keys, row, strict=True)) for row in batch.steps],
                )
        if batch.episodes:
            conn.execute(sa.insert(schema.episodes), batch.episodes)
        if batch.metrics:
            conn.execute(sa.insert(schema.metrics), batch.metrics)
        if batch.steps or batch.transitions:
            # Steps carry no time: the heartbeat of a run dates the last commit of its steps or
            # transitions, the last time an interrupted run is known to have been alive.
            self._touch(conn, {row[0] for row in batch.steps}
                        | {params["p_run"] for params in batch.transitions})
        if batch.finishes:
            result = conn.execute(FINISH_RUN, batch.finishes)
            if conn.dialect.supports_sane_multi_rowcount and result.rowcount < len(batch.finishes):
                # Reported, not raised: rolling back would lose the batch for a caller's slip.
                ids = sorted({p["p_id"] for p in batch.finishes})
                self._record_error(
                    StoreError(f"no such run among ids {ids}"), "run_finished was not recorded"
                )

    def _count(self, batch: Batch) -> None:
        with self._lock:
            s = self._stats
            self._stats = _bump(
                s,
                steps_written=s.steps_written + len(batch.steps),
                episodes_written=s.episodes_written + len(batch.episodes),
                metrics_written=s.metrics_written + len(batch.metrics),
                transitions_written=s.transitions_written + len(batch.transitions),
                runs_finished=s.runs_finished + len(batch.finishes),
                transactions=s.transactions + 1,
            )

    def _run_call(
        self,
        engine: sa.Engine,
        fn: Callable[[sa.Connection], Any],
        result: Future[Any],
        what: str,
    ) -> None:
        if not result.set_running_or_notify_cancel():
            return  # the caller gave up waiting
        try:
            with engine.begin() as conn:
                value = fn(conn)
        except Exception as exc:
            error = StoreError(f"{what}: {describe_error(exc, self._location.url)}")
            error.__cause__ = exc
            result.set_exception(error)
        else:
            result.set_result(value)

    def _heartbeat(self, engine: sa.Engine) -> None:
        if not self._active_runs:
            return
        try:
            with engine.begin() as conn:
                self._touch(conn, self._active_runs)
        except Exception as exc:
            self._record_error(exc, "refreshing the run heartbeat failed")

    @staticmethod
    def _touch(conn: sa.Connection, run_ids: Iterable[int]) -> None:
        """Refresh ``runs.heartbeat_at`` of those of ``run_ids`` still running."""
        conn.execute(
            sa.update(schema.runs)
            .where(schema.runs.c.id.in_(sorted(run_ids)))
            .where(schema.runs.c.status == "running")
            .values(heartbeat_at=time.time())
        )

    def _release_waiters(self) -> None:
        """On thread exit, answer every waiter still queued so that nobody waits in vain."""
        while True:
            try:
                kind, payload = self._queue.popleft()
            except IndexError:
                return
            waiter = payload if kind == FLUSH else payload[1] if kind == CALL else None
            if waiter is not None and waiter.set_running_or_notify_cancel():
                waiter.set_exception(StoreError("the store writer thread has stopped"))


def insert_returning_id(
    conn: sa.Connection, table: sa.Table, row: Mapping[str, Any], what: str
) -> int:
    """Insert ``row`` into ``table`` and return the id the database gave it (for the writer's
    synchronous calls, which run on its thread)."""
    result = conn.execute(sa.insert(table).values(**row))
    key = result.inserted_primary_key
    if key is None:  # pragma: no cover - every supported database returns it
        raise StoreError(f"the database returned no id for the {what}")
    return int(key[0])


def _bump(stats: WriterStats, **changes: int) -> WriterStats:
    return WriterStats(**{**stats.__dict__, **changes})
