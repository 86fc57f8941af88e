"""The store writer's thread: it drains the queue into batches and commits each in one transaction.

:class:`WriterThreadMixin` is the half of :class:`~mosaic.store.writer.StoreWriter` that runs on
the writer thread and touches the database; the caller side in :mod:`mosaic.store.writer` only
enqueues and waits.

What the thread has taken from the queue waits in its *backlog*, in order: batches of records,
synchronous calls and flushes. A write the store refuses for now (a restart, a lost connection,
a locked file, a full disk: see :mod:`mosaic.store._outage`) stays at the head of the backlog and
is tried again with backoff, while the run goes on and the backlog grows: in memory up to
``buffer_rows`` records, past that in a spill file (:mod:`mosaic.store._spill`). When the store
takes writes again, the backlog is written in order and the run never knew. When it has refused
every write for ``outage_s`` seconds (5 s for a full disk), the store is *lost*: everything not
written goes to the spill file, the writer's loss listeners are told (the executor stops the
runs and fails them), and every later record goes to the spill file too, for ``mosaic store
recover``. Nothing is dropped without a word: records the database refuses as such (a
constraint) are counted and reported, and :meth:`verify_run` compares what a run gave the writer
with what the store holds.

Every transaction also sets the writer's own ``meta`` key to its sequence number, so that a
commit whose answer was lost with the connection is found to have happened, and is not written
twice.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

import sqlalchemy as sa

from mosaic.core.errors import StoreError, StoreLost
from mosaic.store import schema
from mosaic.store._batch import (
    CALL,
    CHECKPOINT,
    EPISODE,
    FINISH,
    FLUSH,
    METRICS,
    STEPS,
    TRANSITION,
    Batch,
    MetricRow,
    StepRow,
    delete_meta,
    get_meta,
    metric_param,
    set_meta,
    step_params,
    steps_insert,
    write_batch,
)
from mosaic.store._outage import FULL, FULL_GRACE_S, REFUSED, Outage, classify
from mosaic.store._spill import CHECK, RUN, SpillFile, meta_key
from mosaic.store._values import Encode
from mosaic.store.url import StoreLocation, describe_error, open_engine

_Param = TypeVar("_Param")

# The logger keeps the name of the public module, where this code used to live.
log = logging.getLogger("mosaic.store.writer")

# How often the writer refreshes ``runs.heartbeat_at`` of the runs it started and that are active.
HEARTBEAT_INTERVAL = 30.0
#: The most records one transaction of the backlog takes.
MAX_BATCH_ROWS = 20_000
#: How often the log says again that the store still refuses writes.
REPORT_EVERY_S = 10.0
#: The ``meta`` keys of writers: ``writer:<token>``, the sequence number of its last commit.
WRITER_META_PREFIX = "writer:"


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
class _Call:
    """A synchronous call waiting in the backlog."""

    fn: Callable[[sa.Connection], Any]
    result: Future[Any]
    what: str
    started: bool = False


@dataclass
class _Spilled:
    """Records in the spill file between two offsets, not yet in the store."""

    start: int
    end: int
    rows: int
    tried: bool = False


@dataclass
class _Given:
    """What a run gave the writer: step, episode and metric rows."""

    steps: int = 0
    episodes: int = 0
    metrics: int = 0


class _Failed(Exception):
    """A write the store did not take now; the backlog keeps it."""

    def __init__(self, kind: str, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.kind = kind
        self.exc = exc


class WriterThreadMixin:
    """What :class:`~mosaic.store.writer.StoreWriter` does on its writer thread.

    :meth:`_main` is the thread's target. The attributes below are set by ``StoreWriter``'s
    constructor; the queue, the events, the pending error, the loss and the stats are shared
    with the caller side (the error, the loss and the stats under ``_lock``), the rest is the
    thread's own.
    """

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
        self._backlog: deque[Batch | _Spilled | _Call | Future[None]] = deque()
        self._memory_rows = 0
        self._spill: SpillFile | None = None
        self._spilling = False
        self._for_spill: list[tuple[int, Any]] = []
        self._outage: Outage | None = None
        self._given: dict[int | None, _Given] = {}
        self._seq = 0
        self._writer_key = WRITER_META_PREFIX + uuid.uuid4().hex
        engine: sa.Engine | None = None
        try:
            engine = open_engine(self._location, write=True)
            with engine.begin() as conn:
                schema.ensure_schema(conn)
            self._steps_sql = steps_insert(engine)
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
            if self._spill is not None:
                self._spill.close()
            self._forget_writer_key(engine)
            engine.dispose()

    def _loop(self, engine: sa.Engine, encode: Encode) -> None:
        next_heartbeat = time.monotonic() + HEARTBEAT_INTERVAL
        stopping = False
        while True:
            outage = self._outage
            self._wake.wait(self._flush_interval if outage is None
                            else min(self._flush_interval, max(outage.wait(), 0.01)))
            self._wake.clear()
            stopping = self._take(encode) or stopping
            self._work(engine)
            if stopping and not self._backlog:
                return
            if self._outage is None and time.monotonic() >= next_heartbeat:
                next_heartbeat = time.monotonic() + HEARTBEAT_INTERVAL
                self._heartbeat(engine)

    # -- taking the queue into the backlog ---------------------------------------------------

    def _take(self, encode: Encode) -> bool:
        """Move everything queued into the backlog (or the spill file); True on a stop."""
        items = []
        queue = self._queue
        try:
            while True:
                items.append(queue.popleft())
        except IndexError:
            pass
        self._pending_rows = 0
        stop = False
        for kind, payload in items:
            if kind == STEPS:
                self._given_rows(kind, payload)
                params = self._step_params(payload, encode)
                if params:
                    self._add(STEPS, params)
            elif kind == TRANSITION:
                self._add(kind, payload)
            elif kind == EPISODE:
                self._given_rows(kind, (payload,))
                episode = self._episode_params(payload)
                if episode is not None:
                    self._add(EPISODE, episode)
            elif kind == METRICS:
                self._given_rows(kind, payload)
                metrics = self._metric_params(payload)
                if metrics:
                    self._add(METRICS, metrics)
            elif kind == FINISH:
                self._active_runs.discard(payload["p_id"])
                self._add(kind, payload)
            elif kind == CHECKPOINT:
                self._add(kind, payload)
            elif kind == CALL:
                self._spill_waiting()
                self._backlog.append(_Call(*payload))
            elif kind == FLUSH:
                self._spill_waiting()
                self._backlog.append(payload)
            else:
                stop = True
        self._spill_waiting()
        return stop

    def _given_rows(self, kind: int, rows: Sequence[Any]) -> None:
        """Count the rows a run gave, whether or not they can be stored (see _verify)."""
        try:
            # Counted by their first field as it is, in C; then each distinct value (a call's
            # rows are of one run, mostly) as a run id, which merges 1, np.int64(1) and "1".
            firsts = Counter(map(itemgetter(0), rows))
        except (TypeError, IndexError, KeyError):  # a row too broken to tell its run
            counts = Counter(map(_run_of_row, rows))
        else:
            counts = Counter()
            for first, count in firsts.items():
                counts[_run_of_row((first,))] += count
        for run, count in counts.items():
            given = self._given.get(run)
            if given is None:
                given = self._given[run] = _Given()
            if kind == STEPS:
                given.steps += count
            elif kind == EPISODE:
                given.episodes += count
            else:
                given.metrics += count

    def _add(self, kind: int, params: Any) -> None:
        if self._spilling:
            self._for_spill.append((kind, params))
            return
        tail = self._backlog[-1] if self._backlog else None
        if not isinstance(tail, Batch) or tail.tried or tail.rows() >= MAX_BATCH_ROWS:
            tail = Batch()
            self._backlog.append(tail)
        before = tail.rows()
        tail.add(kind, params)
        self._memory_rows += tail.rows() - before
        if self._outage is not None and self._memory_rows > self._buffer_rows:
            self._start_spilling()

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
             snapshots, chain) = payload
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
                "chain": None if chain is None else str(chain),
            }
        except Exception as exc:
            self._record_error(exc, "an episode record cannot be stored", 1)
            return None

    # -- the spill file ----------------------------------------------------------------------

    def _start_spilling(self) -> None:
        """Move the batches of the backlog to the spill file, in order; later ones go there too.

        A batch that was tried already stays in memory: its commit may have happened (the
        answer lost with the connection), which only the store can tell.
        """
        self._spilling = True
        backlog, self._backlog = self._backlog, deque()
        for entry in backlog:
            if isinstance(entry, Batch) and not entry.tried:
                self._memory_rows -= entry.rows()
                self._to_spill(entry.units)
            else:
                self._backlog.append(entry)
        log.warning("store %s: more than %d records wait for it; the rest wait in %s",
                    self.location, self._buffer_rows,
                    self._spill.path if self._spill is not None else "no spill file")

    def _spill_waiting(self) -> None:
        """Append what :meth:`_take` set aside for the spill file, in one write."""
        if self._for_spill:
            units, self._for_spill = self._for_spill, []
            self._to_spill(units)

    def _to_spill(self, units: Sequence[tuple[int, Any]], mark: bool = True) -> None:
        rows = sum(_unit_rows(kind, params) for kind, params in units)
        try:
            spill = self._open_spill()
            start = spill.end
            spill.append(list(units))
        except (OSError, StoreError) as exc:
            self._record_error(exc, f"{rows} records could neither be written nor spilled", rows)
            return
        with self._lock:
            self._stats = _bump(self._stats, rows_spilled=self._stats.rows_spilled + rows)
        if self._lost is not None or not mark:
            return  # nothing of the backlog is written any more
        tail = self._backlog[-1] if self._backlog else None
        if isinstance(tail, _Spilled) and tail.end == start:
            tail.end, tail.rows = spill.end, tail.rows + rows
        else:
            self._backlog.append(_Spilled(start, spill.end, rows))

    def _open_spill(self) -> SpillFile:
        if self._spill is None:
            self._spill = SpillFile.create(uuid.uuid4().hex, self.location, self._location.path)
            self._spill.append([(RUN, [run, uid]) for run, uid in self._run_uids.items()])
        return self._spill

    def _note_run(self, run_id: int, uid: str) -> None:
        """Remember ``uid`` as the run of ``run_id`` (the spill file names the runs it holds)."""
        self._run_uids[run_id] = uid
        self._active_runs.add(run_id)
        if self._spill is not None:
            self._spill.append([(RUN, [run_id, uid])])

    # -- writing the backlog -----------------------------------------------------------------

    def _work(self, engine: sa.Engine) -> None:
        """Write the backlog in order, until it is empty or the store refuses a write."""
        while self._backlog:
            if self._lost is not None:
                self._fail_backlog()
                return
            if self._outage is not None and self._outage.wait() > 0:
                return
            entry = self._backlog[0]
            try:
                self._write_entry(engine, entry)
            except _Failed as failure:
                self._failed(failure)
                continue
            if self._backlog and self._backlog[0] is entry:
                self._backlog.popleft()
                if isinstance(entry, Batch):
                    self._memory_rows -= entry.rows()
            if self._outage is not None:
                self._recovered()
        if self._spill is not None and self._lost is None:
            self._spill.remove()
            self._spill, self._spilling = None, False

    def _write_entry(self, engine: sa.Engine, entry: Batch | _Spilled | _Call | Future[None],
                     ) -> None:
        if isinstance(entry, Batch):
            self._commit(engine, entry)
        elif isinstance(entry, _Spilled):
            self._commit_spilled(engine, entry)
        elif isinstance(entry, _Call):
            self._run_call(engine, entry)
        elif entry.set_running_or_notify_cancel():  # False: its caller stopped waiting
            entry.set_result(None)

    def _commit(self, engine: sa.Engine, batch: Batch,
                meta: tuple[str, str] | None = None) -> None:
        """Write ``batch`` in one transaction (and ``meta``, a key and value, with it).

        Raises _Failed if the store did not take it now. Records the store refuses as such are
        reported and dropped: only the offending items when there are several.
        """
        if not batch.units:
            return
        if batch.tried and self._committed_before(engine, batch.seq):
            self._count(batch)
            return
        if not batch.tried:
            self._seq += 1
            batch.seq, batch.tried = self._seq, True
        try:
            with engine.begin() as conn:
                missing = write_batch(conn, batch, self._steps_sql)
                if batch.steps or batch.transitions:
                    # Steps carry no time: the heartbeat of a run dates the last commit of its
                    # steps or transitions, the last time an interrupted run is known alive.
                    self._touch(conn, {row[0] for row in batch.steps}
                                | {params["p_run"] for params in batch.transitions})
                set_meta(conn, self._writer_key, str(batch.seq))
                if meta is not None:
                    set_meta(conn, *meta)
        except Exception as exc:
            kind = classify(exc)
            if kind != REFUSED:
                raise _Failed(kind, exc) from exc
            if isinstance(exc, sa.exc.IntegrityError) and len(batch.units) > 1 and meta is None:
                # Write item by item so that only the offending records are lost.
                self._backlog.popleft()
                self._backlog.extendleft(reversed(batch.split()))
                return
            self._record_error(exc, f"writing {batch.rows()} records failed", batch.rows())
            return
        self._count(batch)
        if missing:
            # Reported, not raised: rolling back would lose the batch for a caller's slip.
            self._record_error(StoreError(f"no such run among ids {missing}"),
                               "run_finished was not recorded")

    def _committed_before(self, engine: sa.Engine, seq: int) -> bool:
        """Whether the transaction numbered ``seq`` was committed (its answer may have been
        lost with the connection); _Failed if the store cannot say now."""
        try:
            with engine.begin() as conn:
                done = get_meta(conn, self._writer_key)
        except Exception as exc:
            raise _Failed(classify(exc), exc) from exc
        return done is not None and int(done) >= seq

    def _commit_spilled(self, engine: sa.Engine, entry: _Spilled) -> None:
        """Write the spilled records of ``entry`` in, a transaction per :data:`MAX_BATCH_ROWS`
        records, each recording how far the spill file is written in."""
        spill = self._spill
        if spill is None:  # pragma: no cover - a marker exists only with its file
            raise StoreError("spilled records without a spill file")
        key = meta_key(spill.header.id)
        if entry.tried:  # the last chunk's commit may have happened
            try:
                with engine.begin() as conn:
                    done = get_meta(conn, key)
            except Exception as exc:
                raise _Failed(classify(exc), exc) from exc
            if done is not None:
                entry.start = max(entry.start, int(done))
        while entry.start < entry.end:
            chunk, end = Batch(), entry.start
            for kind, params, after in spill.read(entry.start, entry.end):
                end = after
                if kind not in (RUN, CHECK):  # no CHECK before the store is lost
                    chunk.add(kind, params)
                if chunk.rows() >= MAX_BATCH_ROWS:
                    break
            entry.tried = True
            self._commit(engine, chunk, (key, str(end)))
            entry.rows -= chunk.rows()
            entry.start = end

    def _run_call(self, engine: sa.Engine, call: _Call) -> None:
        if not call.started:
            if not call.result.set_running_or_notify_cancel():
                return  # the caller gave up waiting
            call.started = True
        try:
            with engine.begin() as conn:
                value = call.fn(conn)
        except Exception as exc:
            kind = classify(exc)
            if kind != REFUSED and not isinstance(exc, StoreError):
                raise _Failed(kind, exc) from exc
            error = StoreError(f"{call.what}: {describe_error(exc, self._location.url)}")
            error.__cause__ = exc
            call.result.set_exception(error)
        else:
            call.result.set_result(value)

    # -- outages -----------------------------------------------------------------------------

    def _failed(self, failure: _Failed) -> None:
        reason = describe_error(failure.exc, self._location.url)
        outage = self._outage
        if outage is None:
            outage = self._outage = Outage(failure.kind, reason)
            grace = min(self._outage_s, FULL_GRACE_S) if failure.kind == FULL else self._outage_s
            log.warning("store %s: a write failed (%s); trying again for up to %g s, keeping "
                        "every record meanwhile", self.location, reason, grace)
        outage.failed(failure.kind, reason)
        with self._lock:
            self._stats = _bump(self._stats, retries=self._stats.retries + 1)
        if outage.over(self._outage_s):
            self._give_up(outage)
        elif time.monotonic() - outage.reported >= REPORT_EVERY_S:
            outage.reported = time.monotonic()
            log.warning("store %s: still refusing writes after %.0f s (%s); %d records wait",
                        self.location, outage.lasted(), reason, self._waiting_rows())

    def _recovered(self) -> None:
        outage = self._outage
        if outage is not None:
            log.warning("store %s: writes succeed again after %.1f s; the %d records kept "
                        "meanwhile are being written", self.location, outage.lasted(),
                        self._waiting_rows())
        self._outage = None

    def _waiting_rows(self) -> int:
        return self._memory_rows + sum(entry.rows for entry in self._backlog
                                       if isinstance(entry, _Spilled))

    def _give_up(self, outage: Outage) -> None:
        """The store is lost: everything not written goes to the spill file, for good."""
        why = ("its disk is full" if outage.kind == FULL
               else f"no write succeeded for {outage.lasted():.0f} s")
        self._spilling = True
        backlog, self._backlog = self._backlog, deque()
        self._memory_rows = 0
        # Nothing is written any more: markers of spilled records are dropped (the records are
        # in the file already), batches go to the file; calls and flushes fail below.
        for entry in backlog:
            if isinstance(entry, Batch):
                check = [(CHECK, [self._writer_key, entry.seq, len(entry.units)])] if (
                    entry.tried) else []
                self._to_spill([*check, *entry.units], mark=False)
            elif not isinstance(entry, _Spilled):
                self._backlog.append(entry)
        self._lost_why = f"{why} ({outage.reason})"
        error = self._lost_error(self._lost_why)
        with self._lock:
            self._lost = error
        log.error("%s", error)
        self._fail_backlog()
        for listener in list(self._lost_listeners):
            try:
                listener(error)
            except Exception:
                log.exception("store %s: a listener of the store's loss failed", self.location)

    def _lost_error(self, why: str) -> StoreLost:
        """The error that says the store is lost for ``why``, where the records not written
        are and how to write them in."""
        spill = self._spill
        unwritten = self._stats.rows_spilled
        if spill is None:
            return StoreLost(f"store {self.location} lost: {why}; no record was waiting for it",
                             None, 0)
        return StoreLost(
            f"store {self.location} lost: {why}; {unwritten} records not written are kept in "
            f"{spill.path} (once the store is back: mosaic store recover {spill.path} "
            f"--store {self.location})", str(spill.path), unwritten)

    def _fail_backlog(self) -> None:
        """With the store lost: answer every call and flush in the backlog with the loss."""
        lost = self._lost if self._lost is not None else StoreError("the store is lost")
        while self._backlog:
            entry = self._backlog.popleft()
            if isinstance(entry, _Call):
                if entry.started or entry.result.set_running_or_notify_cancel():
                    entry.result.set_exception(lost)
            elif isinstance(entry, Future) and entry.set_running_or_notify_cancel():
                entry.set_exception(lost)

    # -- run checks and upkeep ---------------------------------------------------------------

    def _verify(self, conn: sa.Connection, run_id: int) -> str | None:
        """What the store lacks of what run ``run_id`` gave the writer (None: nothing)."""
        given = self._given.get(run_id, _Given())
        missing = []
        held_now = _held(conn, run_id)
        for (what, count), held in zip((("steps", given.steps), ("episodes", given.episodes),
                                        ("metrics", given.metrics)), held_now, strict=True):
            if held != count:
                missing.append(f"{held} of {count} {what}")
        if not missing:
            return None
        return (f"the store {self.location} holds {', '.join(missing)} of this run "
                "(see the log for the writer's errors)")

    def _given_from_store(self, conn: sa.Connection, run_id: int) -> None:
        """Count what the store holds of run ``run_id`` as given (a run that continues from a
        checkpoint keeps its rows from before)."""
        self._given[run_id] = _Given(*_held(conn, run_id))

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

    def _heartbeat(self, engine: sa.Engine) -> None:
        if not self._active_runs or self._lost is not None:
            return
        try:
            with engine.begin() as conn:
                self._touch(conn, self._active_runs)
        except Exception as exc:
            log.warning("store %s: refreshing the run heartbeat failed: %s", self.location,
                        describe_error(exc, self._location.url))

    @staticmethod
    def _touch(conn: sa.Connection, run_ids: Iterable[int]) -> None:
        """Refresh ``runs.heartbeat_at`` of those of ``run_ids`` still running."""
        conn.execute(
            sa.update(schema.runs)
            .where(schema.runs.c.id.in_(sorted(run_ids)))
            .where(schema.runs.c.status == "running")
            .values(heartbeat_at=time.time())
        )

    def _forget_writer_key(self, engine: sa.Engine) -> None:
        if self._seq == 0 or self._lost is not None or self._outage is not None:
            return
        try:
            with engine.begin() as conn:
                delete_meta(conn, self._writer_key)
        except Exception as exc:  # only a key left behind
            log.debug("store %s: %s", self.location, describe_error(exc, self._location.url))

    def _release_waiters(self) -> None:
        """On thread exit, answer every waiter still queued so that nobody waits in vain."""
        stopped = StoreError("the store writer thread has stopped")
        for entry in self._backlog:
            if isinstance(entry, _Call):
                if entry.started or entry.result.set_running_or_notify_cancel():
                    entry.result.set_exception(stopped)
            elif isinstance(entry, Future) and entry.set_running_or_notify_cancel():
                entry.set_exception(stopped)
        self._backlog.clear()
        while True:
            try:
                kind, payload = self._queue.popleft()
            except IndexError:
                return
            waiter = payload if kind == FLUSH else payload[1] if kind == CALL else None
            if waiter is not None and waiter.set_running_or_notify_cancel():
                waiter.set_exception(stopped)


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


def _held(conn: sa.Connection, run_id: int) -> tuple[int, int, int]:
    """How many steps, episodes and metrics of run ``run_id`` the store holds."""
    return tuple(  # type: ignore[return-value]
        int(conn.execute(sa.select(sa.func.count()).select_from(table)
                         .where(table.c.run_id == run_id)).scalar_one())
        for table in (schema.steps, schema.episodes, schema.metrics))


def _run_of_row(row: Any) -> int | None:
    """The run of a queued step, episode or metric row (they all start with it); None if the
    row is too broken to tell."""
    try:
        return int(row[0])
    except (TypeError, ValueError, IndexError, KeyError):
        return None


def _unit_rows(kind: int, params: Any) -> int:
    return len(params) if kind in (STEPS, METRICS) else 0 if kind in (RUN, CHECK) else 1


def _bump(stats: WriterStats, **changes: int) -> WriterStats:
    return WriterStats(**{**stats.__dict__, **changes})
