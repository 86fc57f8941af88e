"""The store's one writer: a daemon thread that batches what a run records into few transactions.

The simulation's hot loop only appends to an in-memory queue. The writer thread wakes every
``flush_interval`` seconds (or sooner when ``batch_rows`` step rows are waiting), encodes
observations and actions, and writes everything it drained in one transaction. A process killed
with SIGKILL therefore loses at most what it enqueued in the last interval (plus any backlog, if
it produced faster than the database accepts); everything committed before stays readable.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import sqlalchemy as sa

from mosaic.errors import StoreError
from mosaic.store import schema
from mosaic.store.url import StoreLocation, locate, open_engine

__all__ = ["HEARTBEAT_INTERVAL", "StepRow", "StoreWriter", "WriterStats"]

log = logging.getLogger(__name__)

StepRow = tuple[Any, ...]
"""``(run_id, environment, episode, step, agent, slot, observation, action, reward, terminated,
truncated)``; observation and action are raw Python/NumPy values, encoded by the writer thread."""

Encode = Callable[[Any], bytes]
T = TypeVar("T")

# How often the writer refreshes ``runs.heartbeat_at`` of the runs it started and that are active.
HEARTBEAT_INTERVAL = 30.0
# Slice in which callers waiting on the writer re-check that its thread is still alive.
_POLL = 0.05

_STEPS, _TRANSITION, _EPISODE, _FINISH, _CALL, _FLUSH, _STOP = range(7)

_next_seq = (
    sa.select(sa.func.coalesce(sa.func.max(schema.transitions.c.seq), 0) + 1)
    .where(schema.transitions.c.run_id == sa.bindparam("p_run"))
    .scalar_subquery()
)
# The sequence number comes from the database, so it stays right whoever wrote the earlier ones.
_INSERT_TRANSITION = sa.insert(schema.transitions).values(
    run_id=sa.bindparam("p_run"),
    seq=_next_seq,
    from_state=sa.bindparam("p_from"),
    to_state=sa.bindparam("p_to"),
    reason=sa.bindparam("p_reason"),
    at=sa.bindparam("p_at"),
)
_FINISH_RUN = (
    sa.update(schema.runs)
    .where(schema.runs.c.id == sa.bindparam("p_id"))
    .values(
        status=sa.bindparam("p_status"),
        ended_at=sa.bindparam("p_ended"),
        error=sa.bindparam("p_error"),
        episodes=sa.bindparam("p_episodes"),
        steps=sa.bindparam("p_steps"),
        digest=sa.bindparam("p_digest"),
        heartbeat_at=sa.bindparam("p_ended"),
    )
)


@dataclass(frozen=True)
class WriterStats:
    """What the writer thread has done so far (exact; read from any thread)."""

    steps_written: int = 0
    episodes_written: int = 0
    transitions_written: int = 0
    runs_finished: int = 0
    transactions: int = 0
    rows_dropped: int = 0
    errors: int = 0


class _Batch:
    """Everything drained since the last commit, converted to statement parameters.

    ``units`` keeps one entry per queued item so that a batch refused for a constraint can be
    retried item by item, losing only the offending items.
    """

    __slots__ = ("episodes", "finishes", "steps", "transitions", "units")

    def __init__(self) -> None:
        self.steps: list[tuple[Any, ...]] = []
        self.transitions: list[dict[str, Any]] = []
        self.episodes: list[dict[str, Any]] = []
        self.finishes: list[dict[str, Any]] = []
        self.units: list[tuple[int, Any]] = []

    def add(self, kind: int, params: Any) -> None:
        self.units.append((kind, params))
        if kind == _STEPS:
            self.steps.extend(params)
        elif kind == _TRANSITION:
            self.transitions.append(params)
        elif kind == _EPISODE:
            self.episodes.append(params)
        else:
            self.finishes.append(params)

    def rows(self) -> int:
        return len(self.steps) + len(self.transitions) + len(self.episodes) + len(self.finishes)

    def split(self) -> list[_Batch]:
        parts = []
        for kind, params in self.units:
            part = _Batch()
            part.add(kind, params)
            parts.append(part)
        return parts


class StoreWriter:
    """Writes a run's records to the store from one daemon thread, off the hot loop.

    ``url_or_path`` is a SQLite file path (parent directories are created on :meth:`start`) or a
    SQLAlchemy URL. ``encode`` turns an observation or action into bytes; it defaults to
    ``mosaic.messages.codec.pack``, imported on :meth:`start`.

    The ``record_*`` methods and :meth:`run_finished` only enqueue: they never block and never
    touch the database, and they may be called from any thread. The objects handed over belong to
    the writer from then on; mutating an observation array afterwards changes what is stored.
    The queue is unbounded: a caller that produces faster than the database accepts for long
    grows memory (:attr:`queued` shows how far behind the writer is).

    A database error in the writer thread loses the records of that transaction (for a
    constraint violation, only the offending call's records), is logged once, and is raised as
    StoreError by the next synchronous call, :meth:`flush` or :meth:`close`, whichever comes first.
    Nothing here waits without a timeout.
    """

    def __init__(
        self,
        url_or_path: str | Path | sa.URL,
        *,
        batch_rows: int = 1000,
        flush_interval: float = 0.25,
        encode: Encode | None = None,
    ) -> None:
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
        if not flush_interval > 0:
            raise ValueError(f"flush_interval must be positive, got {flush_interval}")
        self._location: StoreLocation = locate(url_or_path)
        path = self._location.path
        if path is not None and path.is_dir():
            raise StoreError(
                f"store path {path} is a directory; give a database file inside it, "
                f"for example {path / 'mosaic.db'}"
            )
        self._batch_rows = batch_rows
        self._flush_interval = flush_interval
        self._encode = encode
        self._queue: deque[tuple[int, Any]] = deque()
        self._wake = threading.Event()
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._startup_error: StoreError | None = None
        self._error: StoreError | None = None
        # Approximate, updated without a lock by producers: it only decides when to wake early.
        self._pending_rows = 0
        self._stats = WriterStats()
        self._active_runs: set[int] = set()
        self._steps_sql: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The store's file path or URL (password hidden)."""
        return self._location.describe()

    @property
    def queued(self) -> int:
        """How many calls are enqueued and not yet taken up by the writer thread."""
        return len(self._queue)

    @property
    def stats(self) -> WriterStats:
        """A snapshot of what has been written, dropped and failed so far."""
        return self._stats

    def start(self, timeout: float = 10.0) -> None:
        """Open the store (creating tables if missing) and start the writer thread.

        Returns once the store is open. Raises StoreError if it cannot be opened within
        ``timeout`` seconds, holds another schema version, if the codec cannot be imported, or if
        the writer was already started or closed.
        """
        encode = self._encode if self._encode is not None else _default_encode()
        with self._lock:
            if self._closed:
                raise StoreError("this store writer is closed; create a new one")
            if self._thread is not None:
                raise StoreError("this store writer is already started")
            self._thread = threading.Thread(
                target=self._main, args=(encode,), name="mosaic-store-writer", daemon=True
            )
        self._thread.start()
        if not self._ready.wait(timeout):
            self._closed = True
            self._queue.append((_STOP, None))
            self._wake.set()
            raise StoreError(f"store {self.location} did not open within {timeout} s")
        if self._startup_error is not None:
            self._closed = True
            self._thread.join(timeout)
            raise self._startup_error

    @property
    def thread_id(self) -> int | None:
        """The native id of the writer thread once started (for CPU placement)."""
        return self._thread.native_id if self._thread is not None else None

    def close(self, timeout: float = 10.0) -> None:
        """Write everything enqueued, stop the thread and release the database.

        Idempotent. Raises StoreError if the thread has not stopped within ``timeout`` seconds
        (records still queued may then be lost; calling close again waits again), or with a
        pending writer error. Records enqueued after close raise StoreError.
        """
        with self._lock:
            first = not self._closed
            self._closed = True
        thread = self._thread
        if thread is None:
            return
        if first:
            self._queue.append((_STOP, None))
            self._wake.set()
        thread.join(timeout)
        if thread.is_alive():
            raise StoreError(
                f"the store writer did not finish within {timeout} s; "
                f"about {len(self._queue)} queued records may be lost"
            )
        self._raise_pending()

    def __enter__(self) -> Self:
        if self._thread is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until everything enqueued before this call is committed.

        Returns True once it is, False if ``timeout`` seconds passed first (the records are still
        queued and will be written). Raises StoreError with a pending writer error, or if the
        writer is not started or its thread has stopped.
        """
        thread = self._thread
        if thread is None:
            raise StoreError("this store writer is not started; call start() first")
        if not thread.is_alive():
            self._raise_pending()
            if self._closed:
                return True
            raise StoreError("the store writer thread has stopped")
        done: Future[None] = Future()
        self._queue.append((_FLUSH, done))
        self._wake.set()
        try:
            self._await(done, timeout)
        except TimeoutError:
            return False
        self._raise_pending()
        return True

    # -- synchronous calls -------------------------------------------------------------------

    def experiment_started(
        self, uid: str, file: str | None, config: Mapping[str, Any] | None, timeout: float = 10.0
    ) -> int:
        """Record an experiment and return its id.

        Raises StoreError on a database error, a pending writer error (the experiment is then
        not recorded), or when ``timeout`` seconds pass first.
        """
        row = {
            "uid": uid,
            "file": None if file is None else str(file),
            "config": None if config is None else dict(config),
            "created_at": time.time(),
        }

        def insert(conn: sa.Connection) -> int:
            result = conn.execute(sa.insert(schema.experiments).values(**row))
            key = result.inserted_primary_key
            if key is None:  # pragma: no cover - every supported database returns it
                raise StoreError("the database returned no id for the experiment")
            return int(key[0])

        return self._call(insert, timeout, f"recording experiment {uid!r}")

    def run_started(
        self, experiment_id: int, uid: str, run_index: int, seed: int | None, timeout: float = 10.0
    ) -> int:
        """Record a run as running in this process (pid, hostname, now) and return its id.

        Raises StoreError on a database error (a duplicate ``uid``, an unknown experiment), a
        pending writer error (the run is then not recorded), or when ``timeout`` seconds pass.
        """
        now = time.time()
        row = {
            "uid": uid,
            "experiment_id": experiment_id,
            "run_index": run_index,
            "seed": None if seed is None else int(seed),
            "status": "running",
            "started_at": now,
            "heartbeat_at": now,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
        }

        def insert(conn: sa.Connection) -> int:
            result = conn.execute(sa.insert(schema.runs).values(**row))
            key = result.inserted_primary_key
            if key is None:  # pragma: no cover - every supported database returns it
                raise StoreError("the database returned no id for the run")
            run_id = int(key[0])
            self._active_runs.add(run_id)
            return run_id

        return self._call(insert, timeout, f"recording run {uid!r}")

    # -- asynchronous records ----------------------------------------------------------------

    def record_steps(self, rows: Sequence[StepRow]) -> None:
        """Enqueue step rows (see :data:`StepRow`); the list is the writer's from now on.

        Never blocks. Raises StoreError only if the writer is closed. A row that cannot be
        converted or encoded is dropped and reported like a database error.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append((_STEPS, rows))
        pending = self._pending_rows + len(rows)
        self._pending_rows = pending
        if pending >= self._batch_rows and not self._wake.is_set():
            self._wake.set()

    def record_transition(
        self, run_id: int, from_state: str | None, to_state: str, reason: str | None
    ) -> None:
        """Enqueue a state transition of a run, stamped now; ``seq`` counts up per run.

        Never blocks; raises StoreError only if the writer is closed.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        params = {
            "p_run": run_id,
            "p_from": from_state,
            "p_to": to_state,
            "p_reason": reason,
            "p_at": time.time(),
        }
        self._queue.append((_TRANSITION, params))

    def record_episode(
        self,
        run_id: int,
        environment: str,
        episode: int,
        steps: int,
        total_return: float | None,
        returns: Mapping[str, float],
        terminated: bool,
        truncated: bool,
        seed: int | None,
    ) -> None:
        """Enqueue an episode summary; ``returns`` maps environment agent ids to returns.

        Never blocks; raises StoreError only if the writer is closed.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append(
            (
                _EPISODE,
                (
                    run_id,
                    environment,
                    episode,
                    steps,
                    total_return,
                    returns,
                    terminated,
                    truncated,
                    seed,
                ),
            )
        )

    def run_finished(
        self,
        run_id: int,
        status: str,
        error: str | None,
        episodes: int,
        steps: int,
        digest: str | None = None,
    ) -> None:
        """Enqueue the end of a run, stamped now. It is written after every record enqueued before.

        ``status`` is ``finished``, ``failed`` or ``cancelled``. Never blocks; raises StoreError
        for another status or if the writer is closed.
        """
        if status not in schema.FINAL_STATUSES:
            raise StoreError(
                f"a run ends as one of {sorted(schema.FINAL_STATUSES)}, not {status!r}"
            )
        if self._closed:
            raise StoreError("the store writer is closed")
        params = {
            "p_id": run_id,
            "p_status": status,
            "p_ended": time.time(),
            "p_error": error,
            "p_episodes": int(episodes),
            "p_steps": int(steps),
            "p_digest": digest,
        }
        self._queue.append((_FINISH, params))

    # -- caller side helpers -----------------------------------------------------------------

    def _call(self, fn: Callable[[sa.Connection], T], timeout: float, what: str) -> T:
        thread = self._thread
        if thread is None:
            raise StoreError(f"{what}: the store writer is not started; call start() first")
        if self._closed or not thread.is_alive():
            raise StoreError(f"{what}: the store writer is closed")
        self._raise_pending()
        result: Future[T] = Future()
        self._queue.append((_CALL, (fn, result, what)))
        self._wake.set()
        try:
            return self._await(result, timeout)
        except TimeoutError:
            raise StoreError(
                f"{what}: no answer from the store within {timeout} s (the database may be "
                "locked by another process or the writer is far behind)"
            ) from None

    def _await(self, future: Future[T], timeout: float) -> T:
        """Wait for ``future``; TimeoutError after ``timeout``; StoreError if the thread died."""
        deadline = time.monotonic() + timeout
        thread = self._thread
        while True:
            remaining = deadline - time.monotonic()
            try:
                return future.result(timeout=max(0.0, min(remaining, _POLL)))
            except TimeoutError:
                if thread is not None and not thread.is_alive() and not future.done():
                    self._raise_pending()
                    raise StoreError("the store writer thread has stopped") from None
                if remaining <= 0:
                    future.cancel()
                    raise

    def _raise_pending(self) -> None:
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    def _record_error(self, exc: BaseException, context: str, dropped: int = 0) -> None:
        error = StoreError(f"{context}: {_describe(exc)}")
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
                    f"cannot open store {self.location}: {_describe(exc)}"
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
        batch = _Batch()
        flushed: list[Future[None]] = []
        stop = False
        for kind, payload in items:
            if kind == _STEPS:
                params = self._step_params(payload, encode)
                if params:
                    batch.add(_STEPS, params)
            elif kind == _TRANSITION:
                batch.add(kind, payload)
            elif kind == _EPISODE:
                episode = self._episode_params(payload)
                if episode is not None:
                    batch.add(kind, episode)
            elif kind == _FINISH:
                self._active_runs.discard(payload["p_id"])
                batch.add(kind, payload)
            elif kind == _CALL:
                # A synchronous call gets its own transaction so that its failure (say, a
                # duplicate run uid) is its caller's alone.
                self._commit(engine, batch)
                batch = _Batch()
                self._run_call(engine, *payload)
            elif kind == _FLUSH:
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
            return [
                (
                    int(run),
                    env,
                    int(ep),
                    int(st),
                    agent,
                    slot,
                    encode(obs),
                    encode(act),
                    float(rew),
                    bool(term),
                    bool(trunc),
                )
                for run, env, ep, st, agent, slot, obs, act, rew, term, trunc in rows
            ]
        except Exception:
            pass  # some row is bad: redo row by row below to keep the others
        # Keep the good rows; report the bad ones once, with the first reason.
        params = []
        bad: list[tuple[int, Exception]] = []
        for index, row in enumerate(rows):
            try:
                run, env, ep, st, agent, slot, obs, act, rew, term, trunc = row
                params.append(
                    (
                        int(run),
                        env,
                        int(ep),
                        int(st),
                        agent,
                        slot,
                        encode(obs),
                        encode(act),
                        float(rew),
                        bool(term),
                        bool(trunc),
                    )
                )
            except Exception as exc:
                bad.append((index, exc))
        if bad:
            index, first = bad[0]
            self._record_error(
                first,
                f"{len(bad)} of {len(rows)} step rows cannot be stored (first: row {index})",
                len(bad),
            )
        return params

    def _episode_params(self, payload: tuple[Any, ...]) -> dict[str, Any] | None:
        try:
            run, env, ep, steps, total, returns, term, trunc, seed = payload
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
            }
        except Exception as exc:
            self._record_error(exc, "an episode record cannot be stored", 1)
            return None

    def _commit(self, engine: sa.Engine, batch: _Batch) -> None:
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

    def _write(self, conn: sa.Connection, batch: _Batch) -> None:
        # Runs and their children first, run ends last: a run is never seen finished without
        # the steps that were enqueued before its end.
        if batch.transitions:
            conn.execute(_INSERT_TRANSITION, batch.transitions)
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
        if batch.finishes:
            result = conn.execute(_FINISH_RUN, batch.finishes)
            if conn.dialect.supports_sane_multi_rowcount and result.rowcount < len(batch.finishes):
                # Reported, not raised: rolling back would lose the batch for a caller's slip.
                ids = sorted({p["p_id"] for p in batch.finishes})
                self._record_error(
                    StoreError(f"no such run among ids {ids}"), "run_finished was not recorded"
                )

    def _count(self, batch: _Batch) -> None:
        with self._lock:
            s = self._stats
            self._stats = _bump(
                s,
                steps_written=s.steps_written + len(batch.steps),
                episodes_written=s.episodes_written + len(batch.episodes),
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
            error = StoreError(f"{what}: {_describe(exc)}")
            error.__cause__ = exc
            result.set_exception(error)
        else:
            result.set_result(value)

    def _heartbeat(self, engine: sa.Engine) -> None:
        if not self._active_runs:
            return
        try:
            with engine.begin() as conn:
                conn.execute(
                    sa.update(schema.runs)
                    .where(schema.runs.c.id.in_(sorted(self._active_runs)))
                    .where(schema.runs.c.status == "running")
                    .values(heartbeat_at=time.time())
                )
        except Exception as exc:
            self._record_error(exc, "refreshing the run heartbeat failed")

    def _release_waiters(self) -> None:
        """On thread exit, answer every waiter still queued so that nobody waits in vain."""
        while True:
            try:
                kind, payload = self._queue.popleft()
            except IndexError:
                return
            waiter = payload if kind == _FLUSH else payload[1] if kind == _CALL else None
            if waiter is not None and waiter.set_running_or_notify_cancel():
                waiter.set_exception(StoreError("the store writer thread has stopped"))


def _bump(stats: WriterStats, **changes: int) -> WriterStats:
    return WriterStats(**{**stats.__dict__, **changes})


def _describe(exc: BaseException) -> str:
    """A one-line description; SQLAlchemy's own text repeats the SQL and parameters."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
        return f"{type(exc.orig).__name__}: {exc.orig}"
    if isinstance(exc, StoreError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _default_encode() -> Encode:
    try:
        from mosaic.messages.codec import pack
    except ImportError as exc:
        raise StoreError(
            "cannot encode observations: mosaic.messages.codec is not importable "
            f"({exc}); pass encode= to StoreWriter"
        ) from exc
    return pack
