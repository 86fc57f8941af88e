"""The store writer's thread: it drains the queue into batches and commits each in one transaction.

:class:`WriterThreadMixin` is the half of :class:`~mosaic.store.writer.StoreWriter` that runs on
the writer thread and touches the database; the caller side in :mod:`mosaic.store.writer` only
enqueues and waits. What it does while the store refuses writes (the spill file, the outage's
clock, the loss) is in :mod:`mosaic.store._writer_outage`, the state both halves share in
:mod:`mosaic.store._writer_state`.

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

import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from operator import itemgetter
from typing import Any, TypeVar

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.run_states import RunStatus
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
    VIDEO,
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
from mosaic.store._outage import REFUSED, Outage, classify
from mosaic.store._spill import CHECK, RUN, SpillFile, meta_key
from mosaic.store._values import Encode
from mosaic.store._writer_outage import OutageMixin
from mosaic.store._writer_state import (
    GivenRows,
    PendingCall,
    SpilledRecords,
    WriteFailed,
    bump,
    log,
)
from mosaic.store.url import describe_error, open_engine

_Param = TypeVar("_Param")

# How often the writer refreshes ``runs.heartbeat_at`` of the runs it started and that are active.
HEARTBEAT_INTERVAL = 30.0
#: The most records one transaction of the backlog takes.
MAX_BATCH_ROWS = 20_000
#: How often the log says again that the store still refuses writes.
REPORT_EVERY_S = 10.0
#: The ``meta`` keys of writers: ``writer:<token>``, the sequence number of its last commit.
WRITER_META_PREFIX = "writer:"


class WriterThreadMixin(OutageMixin):
    """What :class:`~mosaic.store.writer.StoreWriter` does on its writer thread.

    :meth:`_main` is the thread's target. The attributes it shares with the caller side are
    those of :class:`~mosaic.store._writer_state.WriterState`.
    """

    # -- writer thread -----------------------------------------------------------------------

    def _main(self, encode: Encode) -> None:
        self._backlog: deque[Batch | SpilledRecords | PendingCall | Future[None]] = deque()
        self._memory_rows = 0
        self._spill: SpillFile | None = None
        self._spilling = False
        self._for_spill: list[tuple[int, Any]] = []
        self._outage: Outage | None = None
        self._given: dict[int | None, GivenRows] = {}
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
            elif kind in (CHECKPOINT, VIDEO):
                self._add(kind, payload)
            elif kind == CALL:
                self._spill_waiting()
                self._backlog.append(PendingCall(*payload))
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
                given = self._given[run] = GivenRows()
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
            except WriteFailed as failure:
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

    def _write_entry(self, engine: sa.Engine,
                     entry: Batch | SpilledRecords | PendingCall | Future[None]) -> None:
        if isinstance(entry, Batch):
            self._commit(engine, entry)
        elif isinstance(entry, SpilledRecords):
            self._commit_spilled(engine, entry)
        elif isinstance(entry, PendingCall):
            self._run_call(engine, entry)
        elif entry.set_running_or_notify_cancel():  # False: its caller stopped waiting
            entry.set_result(None)

    def _commit(self, engine: sa.Engine, batch: Batch,
                meta: tuple[str, str] | None = None) -> None:
        """Write ``batch`` in one transaction (and ``meta``, a key and value, with it).

        Raises WriteFailed if the store did not take it now. Records the store refuses as such are
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
                raise WriteFailed(kind, exc) from exc
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
        lost with the connection); WriteFailed if the store cannot say now."""
        try:
            with engine.begin() as conn:
                done = get_meta(conn, self._writer_key)
        except Exception as exc:
            raise WriteFailed(classify(exc), exc) from exc
        return done is not None and int(done) >= seq

    def _commit_spilled(self, engine: sa.Engine, entry: SpilledRecords) -> None:
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
                raise WriteFailed(classify(exc), exc) from exc
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

    def _run_call(self, engine: sa.Engine, call: PendingCall) -> None:
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
                raise WriteFailed(kind, exc) from exc
            error = StoreError(f"{call.what}: {describe_error(exc, self._location.url)}")
            error.__cause__ = exc
            call.result.set_exception(error)
        else:
            call.result.set_result(value)

    # -- run checks and upkeep ---------------------------------------------------------------

    def _verify(self, conn: sa.Connection, run_id: int) -> str | None:
        """What the store lacks of what run ``run_id`` gave the writer (None: nothing)."""
        given = self._given.get(run_id, GivenRows())
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
        self._given[run_id] = GivenRows(*_held(conn, run_id))

    def _count(self, batch: Batch) -> None:
        with self._lock:
            s = self._stats
            self._stats = bump(
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
            .where(schema.runs.c.status == RunStatus.RUNNING.value)
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
            if isinstance(entry, PendingCall):
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


