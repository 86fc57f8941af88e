"""The store's one writer: a daemon thread that batches what a run records into few transactions.

The simulation's hot loop only appends to an in-memory queue. The writer thread wakes every
``flush_interval`` seconds (or sooner when ``batch_rows`` step rows are waiting), encodes
observations and actions, and writes everything it drained in one transaction. A process killed
with SIGKILL therefore loses at most what it enqueued in the last interval (plus any backlog, if
it produced faster than the database accepts); everything committed before stays readable.

A store that refuses writes for a while (a database restart, a locked file) loses nothing: the
records wait, in memory and then in a spill file, and are written when it takes writes again.
One that refuses them for ``outage_s`` seconds is *lost*: see :attr:`StoreWriter.lost`.

This module is the caller side. What runs on the writer thread is in
:mod:`mosaic.store._writer_thread`, and the queued items and batches in :mod:`mosaic.store._batch`.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import sqlalchemy as sa

from mosaic.core.errors import StoreError, StoreLost
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
    STOP,
    TRANSITION,
    VIDEO,
    MetricRow,
    StepRow,
)
from mosaic.store._values import COMPRESS_ABOVE, Encode, compressing
from mosaic.store._writer_state import WriterStats
from mosaic.store._writer_thread import (
    HEARTBEAT_INTERVAL,
    WriterThreadMixin,
    insert_returning_id,
)
from mosaic.store.resume import (
    RestartPoint,
    StoredExperiment,
    StoredRun,
    file_hash,
    find_experiment,
    restart_run,
)
from mosaic.store.url import StoreLocation, locate

__all__ = ["HEARTBEAT_INTERVAL", "MetricRow", "StepRow", "StoreWriter", "WriterStats"]

T = TypeVar("T")

# Slice in which callers waiting on the writer re-check that its thread is still alive.
_POLL = 0.05
#: How long a synchronous record (an experiment, a run) may wait for the writer. Generous: the
#: writer may first have to commit a backlog of steps, or wait out another SQLite writer's lock.
CALL_TIMEOUT_S = 30.0
#: How long the store may refuse every write before it is given up on (``store.outage_s``).
OUTAGE_S = 60.0
#: How many records wait in memory for a store that refuses writes; the rest wait on disk.
BUFFER_ROWS = 100_000


class StoreWriter(WriterThreadMixin):
    """Writes a run's records to the store from one daemon thread, off the hot loop.

    ``url_or_path`` is a SQLite file path (parent directories are created on :meth:`start`) or a
    SQLAlchemy URL. ``encode`` turns an observation or action into bytes; it defaults to
    ``mosaic.messages.codec.pack``, imported on :meth:`start`. Encoded values of at least
    ``compress_above`` bytes (NumPy images, say) are stored zstd-compressed when that makes them
    smaller, and :func:`~mosaic.store.open_store` decodes them transparently; ``None`` stores
    every value as ``encode`` returns it.

    The ``record_*`` methods and :meth:`run_finished` only enqueue: they never block and never
    touch the database, and they may be called from any thread. The objects handed over belong to
    the writer from then on; mutating an observation array afterwards changes what is stored.
    The queue is unbounded: a caller that produces faster than the database accepts for long
    grows memory (:attr:`queued` shows how far behind the writer is).

    A write the database cannot take now (a restart, a dropped connection, a locked file, a
    full disk) is tried again with backoff; meanwhile the records wait in memory, past
    ``buffer_rows`` of them in a spill file (:mod:`mosaic.store._spill`), and are written in
    order once it succeeds. If no write succeeds for ``outage_s`` seconds (5 s for a full
    disk), the store is lost: every record not written, then and later, goes to the spill
    file, the listeners of :meth:`on_lost` are told, synchronous calls and flushes raise
    :class:`~mosaic.core.errors.StoreLost`, and so does :meth:`close`, naming the spill file
    (``mosaic store recover`` writes it in later).

    Records the database refuses as such (a constraint violation: only the offending call's
    records) or that cannot be converted are dropped, logged once, and raised as StoreError by
    the next synchronous call, :meth:`flush` or :meth:`close`, whichever comes first; and
    :meth:`verify_run` tells a run that lost any. Nothing here waits without a timeout.
    """

    def __init__(
        self,
        url_or_path: str | Path | sa.URL,
        *,
        batch_rows: int = 1000,
        flush_interval: float = 0.25,
        encode: Encode | None = None,
        compress_above: int | None = COMPRESS_ABOVE,
        outage_s: float = OUTAGE_S,
        buffer_rows: int = BUFFER_ROWS,
    ) -> None:
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
        if not flush_interval > 0:
            raise ValueError(f"flush_interval must be positive, got {flush_interval}")
        if not outage_s > 0:
            raise ValueError(f"outage_s must be positive, got {outage_s}")
        if buffer_rows < 1:
            raise ValueError(f"buffer_rows must be at least 1, got {buffer_rows}")
        if compress_above is not None and compress_above < 1:
            raise ValueError(f"compress_above must be at least 1 or None, got {compress_above}")
        self._location: StoreLocation = locate(url_or_path)
        path = self._location.path
        if path is not None and path.is_dir():
            raise StoreError(
                f"store path {path} is a directory; give a database file inside it, "
                f"for example {path / 'mosaic.db'}"
            )
        self._batch_rows = batch_rows
        self._flush_interval = flush_interval
        self._outage_s = outage_s
        self._buffer_rows = buffer_rows
        self._encode = encode
        self._compress_above = compress_above
        self._queue: deque[tuple[int, Any]] = deque()
        self._wake = threading.Event()
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._startup_error: StoreError | None = None
        self._error: StoreError | None = None
        self._lost: StoreLost | None = None
        self._lost_why = ""
        self._lost_listeners: list[Callable[[StoreLost], None]] = []
        self._run_uids: dict[int, str] = {}
        # Approximate, updated without a lock by producers: it only decides when to wake early.
        self._pending_rows = 0
        self._stats = WriterStats()
        self._active_runs: set[int] = set()
        self._steps_sql: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        """How many calls are enqueued and not yet taken up by the writer thread."""
        return len(self._queue)

    @property
    def outage_s(self) -> float:
        """How long the store may refuse every write before it is lost."""
        return self._outage_s

    @property
    def lost(self) -> StoreLost | None:
        """Why the store is lost, once it is (see the class); None while it is not."""
        return self._lost

    def on_lost(self, listener: Callable[[StoreLost], None]) -> None:
        """Call ``listener`` with the error once the store is lost (on the writer thread: it
        must only set flags). A listener added after the loss is called at once."""
        with self._lock:
            self._lost_listeners.append(listener)
            lost = self._lost
        if lost is not None:
            listener(lost)

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
        encode = compressing(self._encode if self._encode is not None else _default_encode(),
                             self._compress_above)
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
            self._queue.append((STOP, None))
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
            self._queue.append((STOP, None))
            self._wake.set()
        thread.join(timeout)
        if thread.is_alive():
            raise StoreError(
                f"the store writer did not finish within {timeout} s; "
                f"about {len(self._queue)} queued records may be lost"
            )
        lost = self._lost
        if lost is not None:  # the final count of what waits in the spill file
            raise self._lost_error(self._lost_why)
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
        writer is not started or its thread has stopped; StoreLost once the store is lost
        (nothing is committed any more).
        """
        thread = self._thread
        if thread is None:
            raise StoreError("this store writer is not started; call start() first")
        if self._lost is not None:
            raise self._lost
        if not thread.is_alive():
            self._raise_pending()
            if self._closed:
                return True
            raise StoreError("the store writer thread has stopped")
        done: Future[None] = Future()
        self._queue.append((FLUSH, done))
        self._wake.set()
        try:
            self._await(done, timeout)
        except TimeoutError:
            return False
        self._raise_pending()
        return True

    # -- synchronous calls -------------------------------------------------------------------

    def experiment_started(
        self, uid: str, file: str | None, config: Mapping[str, Any] | None,
        timeout: float = CALL_TIMEOUT_S, *, text: str | None = None,
        run_prefix: str | None = None,
    ) -> int:
        """Record an experiment and return its id.

        ``text`` (the file's text, kept with its hash) and ``run_prefix`` (what its runs' uids
        start with) let a later command resume it (see :meth:`find_experiment`).

        Raises StoreError on a database error, a pending writer error (the experiment is then
        not recorded), or when ``timeout`` seconds pass first.
        """
        row = {
            "uid": uid,
            "file": None if file is None else str(file),
            "config": None if config is None else dict(config),
            "created_at": time.time(),
            "text": text,
            "hash": None if text is None else file_hash(text),
            "run_prefix": run_prefix,
        }

        def insert(conn: sa.Connection) -> int:
            return insert_returning_id(conn, schema.experiments, row, "experiment")

        return self._call(insert, timeout, f"recording experiment {uid!r}")

    def run_started(
        self, experiment_id: int, uid: str, run_index: int, seed: int | None,
        timeout: float = CALL_TIMEOUT_S, *, params: Mapping[str, Any] | None = None,
        agents: Mapping[str, Mapping[str, str]] | None = None,
    ) -> int:
        """Record a run as running in this process (pid, hostname, now) and return its id.

        ``params`` are the values of the experiment's sweep the run was given, by key path
        (plain data, stored as JSON; ``None`` without a sweep). ``agents`` says which agent
        plays each env agent of each environment (``{environment: {env agent: agent}}``): what
        readers turn the episodes' returns into each agent's return with.

        Raises StoreError on a database error (a duplicate ``uid``, an unknown experiment), a
        pending writer error (the run is then not recorded), or when ``timeout`` seconds pass.
        """
        now = time.time()
        row = {
            "uid": uid,
            "experiment_id": experiment_id,
            "run_index": run_index,
            "seed": None if seed is None else int(seed),
            "status": RunStatus.RUNNING.value,
            "started_at": now,
            "heartbeat_at": now,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "params": None if params is None else dict(params),
            "agents": None if agents is None else {
                environment: dict(mapping) for environment, mapping in agents.items()},
        }

        def insert(conn: sa.Connection) -> int:
            run_id = insert_returning_id(conn, schema.runs, row, "run")
            self._note_run(run_id, uid)
            return run_id

        return self._call(insert, timeout, f"recording run {uid!r}")

    def find_experiment(self, uid: str, timeout: float = CALL_TIMEOUT_S,
                        ) -> StoredExperiment | None:
        """The latest experiment ``uid`` recorded with its file's text, and its runs (None if
        the store holds none). Raises StoreError as the other synchronous calls do."""
        return self._call(lambda conn: find_experiment(conn, uid), timeout,
                          f"finding experiment {uid!r}")

    def run_restarted(self, run: StoredRun, reason: str, environment: str | None = None,
                      episodes: Sequence[int] = (), timeout: float = CALL_TIMEOUT_S,
                      ) -> RestartPoint:
        """Make the stored ``run`` run again in its own row, from the first of ``episodes``
        (of ``environment``) the store can continue from, or from its start (see
        :func:`mosaic.store.resume.restart_run`), as running in this process; return where it
        continues. Raises StoreError as the other synchronous calls do."""

        def restart(conn: sa.Connection) -> RestartPoint:
            point = restart_run(conn, run, reason, environment, episodes)
            self._note_run(run.id, run.uid)
            # What it gave before is removed with its rows, but for the episodes it keeps.
            self._given.pop(run.id, None)
            if point.episode:
                self._given_from_store(conn, run.id)
            return point

        return self._call(restart, timeout, f"resuming run {run.uid!r}")

    def verify_run(self, run_id: int, timeout: float = CALL_TIMEOUT_S) -> str | None:
        """Check that the store holds every step, episode and metric row of run ``run_id`` that
        this writer was given, once everything enqueued before is written: None if it does,
        else what it lacks, in words (rows refused or that could not be encoded).

        Raises StoreError as the other synchronous calls do (StoreLost once the store is lost).
        """
        return self._call(lambda conn: self._verify(conn, run_id), timeout,
                          f"checking the records of run {run_id}")

    # -- asynchronous records ----------------------------------------------------------------

    def record_steps(self, rows: Sequence[StepRow]) -> None:
        """Enqueue step rows (see :data:`StepRow`); the list is the writer's from now on.

        Never blocks. Raises StoreError only if the writer is closed. A row that cannot be
        converted or encoded is dropped and reported like a database error.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append((STEPS, rows))
        pending = self._pending_rows + len(rows)
        self._pending_rows = pending
        if pending >= self._batch_rows and not self._wake.is_set():
            self._wake.set()

    def record_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Enqueue metric rows (see :data:`MetricRow`); the list is the writer's from now on.

        Never blocks. Raises StoreError only if the writer is closed. A row that cannot be
        converted is dropped and reported like a database error.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append((METRICS, rows))

    def record_transition(
        self, run_id: int, from_state: str | None, to_state: str, reason: str | None
    ) -> None:
        """Enqueue a state transition of a run, stamped now; ``seq`` counts up per run.

        The states are text: a :class:`~mosaic.core.run_states.RunState` is kept as its text, as
        the store and a spill file hold it. Never blocks; raises StoreError only if the writer
        is closed.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        params = {
            "p_run": run_id,
            "p_from": None if from_state is None else str(from_state),
            "p_to": str(to_state),
            "p_reason": reason,
            "p_at": time.time(),
        }
        self._queue.append((TRANSITION, params))

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
        copy: int = 0,
        evaluation: bool = False,
        snapshots: Mapping[str, int] | None = None,
        chain: str | None = None,
    ) -> None:
        """Enqueue an episode summary; ``returns`` maps environment agent ids to returns.

        ``copy`` is the copy of an environment with ``copies:`` the episode ran in;
        ``evaluation`` marks a greedy evaluation episode (``evaluate_every``), not a training one;
        ``snapshots`` names the snapshot each self-play agent played with (see ``self_play``);
        ``chain`` is the run's digest chain once the episode ended (hex).

        Never blocks; raises StoreError only if the writer is closed.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append(
            (
                EPISODE,
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
                    copy,
                    evaluation,
                    snapshots,
                    chain,
                ),
            )
        )

    def record_checkpoint(self, run_id: int, name: str, data: bytes, episodes: int = 0) -> None:
        """Enqueue an agent's checkpoint file of run ``run_id`` (its bytes; ``name`` as in
        :func:`mosaic.core.checkpoints.checkpoint_name`): it replaces the one of that name
        before. ``episodes``: the episode a periodic checkpoint was saved at (0: another).

        Never blocks; raises StoreError only if the writer is closed.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append((CHECKPOINT, {
            "run_id": int(run_id), "name": str(name), "episodes": int(episodes),
            "sha256": hashlib.sha256(data).hexdigest(), "data": bytes(data),
            "saved_at": time.time()}))

    def record_video(self, run_id: int, environment: str, episode: int, folder: str, name: str,
                     size: int) -> None:
        """Enqueue a video of run ``run_id``: training episode ``episode`` of ``environment``,
        the file ``name`` (``size`` bytes) in ``folder``. It replaces the row of that episode
        before (a continued run records its videos again).

        Never blocks; raises StoreError only if the writer is closed.
        """
        if self._closed:
            raise StoreError("the store writer is closed")
        self._queue.append((VIDEO, {
            "run_id": int(run_id), "environment": str(environment), "episode": int(episode),
            "folder": str(folder), "name": str(name), "bytes": int(size),
            "recorded_at": time.time()}))

    def saved_checkpoint(self, run_uid: str, name: str,
                         timeout: float = CALL_TIMEOUT_S) -> bytes | None:
        """The checkpoint file ``name`` of run ``run_uid`` the store holds, once everything
        enqueued before is written (None if it holds none). Raises StoreError if its bytes do
        not match their hash, and as the other synchronous calls do."""

        def read(conn: sa.Connection) -> bytes | None:
            c, r = schema.checkpoints, schema.runs
            row = conn.execute(sa.select(c.c.data, c.c.sha256).join(r, r.c.id == c.c.run_id)
                               .where(r.c.uid == run_uid, c.c.name == name)).first()
            if row is None:
                return None
            data = bytes(row.data)
            if hashlib.sha256(data).hexdigest() != row.sha256:
                raise StoreError(f"the store's checkpoint {name} of run {run_uid} is damaged "
                                 "(its bytes do not match their hash)")
            return data

        return self._call(read, timeout, f"reading checkpoint {name} of run {run_uid!r}")

    def run_finished(
        self,
        run_id: int,
        status: RunStatus,
        error: str | None,
        episodes: int,
        steps: int,
        digest: str | None = None,
        *,
        started_at: float | None = None,
    ) -> None:
        """Enqueue the end of a run, stamped now. It is written after every record enqueued before.

        ``status`` is one of :data:`~mosaic.core.run_states.FINAL_STATUSES`. ``started_at``
        (``time.time()`` of this process), if given, replaces the run's start that
        :meth:`run_started` recorded: a run on a Ray cluster starts once a node has room for it,
        not when it was submitted.
        Never blocks; raises StoreError for another status or if the writer is closed.
        """
        if status not in schema.FINAL_STATUSES:
            raise StoreError(
                f"a run ends as one of {sorted(s.value for s in schema.FINAL_STATUSES)}, "
                f"not {str(status)!r}"
            )
        if self._closed:
            raise StoreError("the store writer is closed")
        params = {
            "p_id": run_id,
            "p_status": RunStatus(status).value,  # the plain text, as a spill file keeps it
            "p_ended": time.time(),
            "p_error": error,
            "p_episodes": int(episodes),
            "p_steps": int(steps),
            "p_digest": digest,
            "p_started": started_at,
        }
        self._queue.append((FINISH, params))

    # -- caller side helpers -----------------------------------------------------------------

    def _call(self, fn: Callable[[sa.Connection], T], timeout: float, what: str) -> T:
        thread = self._thread
        if thread is None:
            raise StoreError(f"{what}: the store writer is not started; call start() first")
        if self._closed or not thread.is_alive():
            raise StoreError(f"{what}: the store writer is closed")
        if self._lost is not None:
            raise self._lost
        self._raise_pending()
        result: Future[T] = Future()
        self._queue.append((CALL, (fn, result, what)))
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


def _default_encode() -> Encode:
    try:
        from mosaic.messages.codec import pack
    except ImportError as exc:
        raise StoreError(
            "cannot encode observations: mosaic.messages.codec is not importable "
            f"({exc}); pass encode= to StoreWriter"
        ) from exc
    return pack
