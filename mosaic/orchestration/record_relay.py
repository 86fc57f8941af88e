"""A run's records on their way from a Ray node to the one store writer, with the command.

On the node, :class:`RecordRelay` stands in for the store writer: the run's components record
into it as they would into the writer (nothing blocks), and a thread of its own sends what
piled up, with the run's progress counters, every :data:`RELAY_EVERY_S` over mosaic's ZeroMQ
transport (tcp, CURVE with the run's keys), the records of a batch packed as one value. The
command answers each batch once it has taken it, and says whether the run is cancelled. In the
command, :func:`apply` hands a batch to the writer and updates the run's progress, which the
command's display reads; :class:`RecordSink` does the same with the records decoded and handed
on a thread of its own.

Neither side grows without bound: a relay holds at most :data:`MAX_QUEUED` calls (its callers
wait past that), and the command holds its answer while its writer is more than
:data:`WRITER_BACKLOG` calls behind, so that a slow store slows the run's step loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from mosaic.conductors.run_context import RunContext, RunRecords
from mosaic.core.errors import CodecError, MosaicError
from mosaic.messages import RunRecordsRequest, RunRecordsResponse
from mosaic.messages.codec import pack, unpack
from mosaic.messages.relay import RECORD_KINDS
from mosaic.stepping.progress import RECENT_EPISODES, Progress
from mosaic.transport import RequestClient

__all__ = ["RELAY_EVERY_S", "RecordRelay", "RecordSink", "apply"]

log = logging.getLogger(__name__)

#: How often a run on a node sends its records (and says it is alive).
RELAY_EVERY_S = 0.1
#: How long the command may take to answer one batch before the run gives up on it and cancels.
ANSWER_TIMEOUT_S = 30.0
#: The most records in one batch (a frame stays far below the codec's limit).
BATCH_RECORDS = 256
#: The most calls a relay holds for the command; a caller past it waits (up to
#: :data:`ANSWER_TIMEOUT_S`) for the sending thread. Above the step loop's own bound on
#: ``queued`` (``STORE_BACKLOG``), which it waits on between work chunks, seeing control
#: messages meanwhile: this one stops the callers that do not look (metrics from other threads).
MAX_QUEUED = 4000
#: How many calls the command's writer may have queued before :func:`apply` holds the answer
#: (up to :data:`WRITER_WAIT_S`): the run's relay then waits, its queue fills and the run's
#: step loop slows, instead of the command's memory growing with a writer that falls behind.
WRITER_BACKLOG = 1000
WRITER_WAIT_S = 1.0
#: How many requests' records a :class:`RecordSink` holds before it holds the answer.
MAX_PENDING = 8
_WAIT_SLICE_S = 0.01

_PROGRESS_FIELDS = ("episodes", "steps", "episodes_total", "return_sum", "last_return",
                    "digest", "chain", "first_step_at", "last_step_at", "ended_early",
                    "pruned")


def snapshot(progress: Progress) -> dict[str, Any]:
    """``progress`` as plain data."""
    plain: dict[str, Any] = {name: getattr(progress, name) for name in _PROGRESS_FIELDS}
    plain["agent_return_sums"] = dict(progress.agent_return_sums)
    plain["agent_episodes"] = dict(progress.agent_episodes)
    plain["positions"] = {uid: list(at) for uid, at in progress.positions.items()}
    plain["copy_episodes"] = {uid: list(at) for uid, at in progress.copy_episodes.items()}
    plain["recent_returns"] = list(progress.recent_returns)
    plain["reported"] = [list(pair) for pair in progress.reported]
    plain["agent_recent_returns"] = {agent: list(recent) for agent, recent
                                     in list(progress.agent_recent_returns.items())}
    return plain


def apply(request: RunRecordsRequest, store: RunRecords, ctx: RunContext) -> None:
    """Hand ``request``'s records to ``store`` (for ``ctx``'s run only) and take its progress
    into ``ctx.progress``. A record of another run or of an unknown kind is dropped and logged.

    The records are decoded here, on the caller's thread; :class:`RecordSink` does it on a
    thread of its own. Returns once ``store`` has fewer than :data:`WRITER_BACKLOG` calls
    queued, or after :data:`WRITER_WAIT_S`: the answer the caller sends next is the run's
    signal to go on.
    """
    _hand(request.records, store, ctx)
    _take_progress(request.progress, ctx.progress)
    deadline = time.monotonic() + WRITER_WAIT_S
    while store.queued > WRITER_BACKLOG and time.monotonic() < deadline:
        time.sleep(_WAIT_SLICE_S)


def _hand(records: Sequence[Any], store: RunRecords, ctx: RunContext) -> None:
    """Hand ``records`` (a request's: ``(kind, args)`` items, or batches of them packed as
    bytes, as :class:`RecordRelay` sends them) to ``store``."""
    for item in records:
        if isinstance(item, (bytes, bytearray, memoryview)):
            try:
                unpacked = unpack(item)
                if not isinstance(unpacked, list):
                    raise CodecError(f"a list of records, not {type(unpacked).__name__}")
            except CodecError as error:
                log.error("run %s: a relayed batch of records was dropped: %s", ctx.run_uid,
                          error)
                continue
            _hand(unpacked, store, ctx)
            continue
        try:
            kind, args = item
            if kind not in RECORD_KINDS:
                raise ValueError(f"unknown record kind {kind!r}")
            if kind in ("transition", "episode", "checkpoint") and args[0] != ctx.run_id:
                raise ValueError(f"a record of run id {args[0]}, not {ctx.run_id}")
            if kind in ("steps", "metrics"):
                args = ([row for row in args[0] if row[0] == ctx.run_id],)
            getattr(store, f"record_{kind}")(*args)
        except (ValueError, TypeError, IndexError) as error:
            log.error("run %s: a relayed record was dropped: %s", ctx.run_uid, error)


def _take_progress(fields: Mapping[str, Any], progress: Progress) -> None:
    for name in _PROGRESS_FIELDS:
        if name in fields:
            setattr(progress, name, fields[name])
    progress.agent_return_sums = dict(fields.get("agent_return_sums", {}))
    progress.agent_episodes = {agent: int(count) for agent, count
                               in fields.get("agent_episodes", {}).items()}
    progress.positions = {uid: (int(at[0]), int(at[1]), int(at[2]))
                          for uid, at in fields.get("positions", {}).items()}
    progress.copy_episodes = {uid: tuple(int(episode) for episode in at)
                              for uid, at in fields.get("copy_episodes", {}).items()}
    progress.reported = [(int(step), float(value))
                         for step, value in fields.get("reported", ())]
    progress.recent_returns.clear()
    progress.recent_returns.extend(fields.get("recent_returns", ()))
    progress.agent_recent_returns = {
        agent: deque(recent, maxlen=RECENT_EPISODES)
        for agent, recent in fields.get("agent_recent_returns", {}).items()}


class RecordSink:
    """The command's side of one run's relay: :func:`apply` with the records decoded and handed
    to ``store`` on a thread of its own, in the order the requests came, off the thread that
    serves the run (and draws the command's display).

    :meth:`submit` takes a request's progress at once and queues its records; :meth:`close`
    hands every record submitted to ``store`` before it returns (within ``timeout``): call it
    before the run's end is recorded, so that the run is never seen finished without them.
    """

    def __init__(self, store: RunRecords, ctx: RunContext) -> None:
        self.store = store
        self.ctx = ctx
        self._pending: deque[Sequence[Any]] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"relay-sink-{ctx.run_uid}",
                                        daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """How many requests' records wait to be handed to the store."""
        return len(self._pending)

    def submit(self, request: RunRecordsRequest) -> None:
        """Take ``request``'s progress into the run's and queue its records for the store.

        Returns once fewer than :data:`MAX_PENDING` requests wait here and the store has fewer
        than :data:`WRITER_BACKLOG` calls queued, or after :data:`WRITER_WAIT_S`: the answer
        the caller sends next is the run's signal to go on. After :meth:`close`, the records
        are handed to the store on the caller's thread.
        """
        _take_progress(request.progress, self.ctx.progress)
        with self._changed:
            if not self._closed:
                self._pending.append(request.records)
                self._changed.notify_all()
                deadline = time.monotonic() + WRITER_WAIT_S
                while ((len(self._pending) >= MAX_PENDING or self.store.queued > WRITER_BACKLOG)
                       and self._thread.is_alive()):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(min(remaining, _WAIT_SLICE_S))
                return
        _hand(request.records, self.store, self.ctx)

    def close(self, timeout: float = ANSWER_TIMEOUT_S) -> None:
        """Hand what is queued to the store and end the thread; logs (does not raise) what was
        not handed within ``timeout`` seconds. Idempotent."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("run %s: %d relayed batches of records were not handed to the store "
                      "within %g s", self.ctx.run_uid, len(self._pending), timeout)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._closed:
                    self._changed.wait(RELAY_EVERY_S)
                if not self._pending:
                    return
                records = self._pending[0]
            try:
                _hand(records, self.store, self.ctx)
            except Exception:  # a defect: the next batches still reach the store
                log.exception("run %s: handing relayed records to the store failed",
                              self.ctx.run_uid)
            with self._changed:
                self._pending.popleft()
                self._changed.notify_all()


class RecordRelay:
    """The store writer of a run on a Ray node: records go to the command at ``endpoint``.

    :meth:`start` starts the sending thread; :meth:`close` sends what is left (and the final
    progress) and ends it, within :data:`ANSWER_TIMEOUT_S`. When the command asks for it, or
    stops answering, the run's ``cancelled`` is set.

    The ``record_*`` methods return at once while fewer than :data:`MAX_QUEUED` calls wait to
    be sent; past that they wait for the sending thread, at most :data:`ANSWER_TIMEOUT_S` (the
    command then stops answering, and the run is cancelled), and not at all once the relay is
    lost or stopped.
    """

    def __init__(self, endpoint: str, ctx: RunContext, node: str) -> None:
        self.endpoint = endpoint
        self.ctx = ctx
        self.node = node
        self._queue: deque[tuple[str, tuple[Any, ...]]] = deque()
        self._room = threading.Condition()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"relay-{ctx.run_uid}",
                                        daemon=True)
        self.lost: str | None = None

    # -- the writer's interface (see RunRecords) ----------------------------------------------
    @property
    def queued(self) -> int:
        return len(self._queue)

    def record_steps(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self._put(("steps", (list(rows),)))

    def record_metrics(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self._put(("metrics", (list(rows),)))

    def record_transition(self, run_id: int, from_state: str | None, to_state: str,
                          reason: str | None) -> None:
        self._put(("transition", (run_id, from_state, to_state, reason)))

    def record_checkpoint(self, run_id: int, name: str, data: bytes, episodes: int = 0) -> None:
        self._put(("checkpoint", (run_id, name, bytes(data), episodes)))

    def record_episode(self, run_id: int, environment: str, episode: int, steps: int,
                       total_return: float | None, returns: Mapping[str, float],
                       terminated: bool, truncated: bool, seed: int | None, copy: int = 0,
                       evaluation: bool = False,
                       snapshots: Mapping[str, int] | None = None,
                       chain: str | None = None) -> None:
        self._put(("episode", (run_id, environment, episode, steps, total_return,
                                        dict(returns), terminated, truncated, seed, copy,
                                        evaluation,
                                        None if snapshots is None else dict(snapshots),
                                        chain)))

    def _put(self, item: tuple[str, tuple[Any, ...]]) -> None:
        if len(self._queue) >= MAX_QUEUED:
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            with self._room:
                while (len(self._queue) >= MAX_QUEUED and self.lost is None
                       and self._thread.is_alive()):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._room.wait(min(remaining, 0.1))
        self._queue.append(item)

    # -- sending -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Send the rest and stop; logs (does not raise) if the command did not take it."""
        self._closing.set()
        self._thread.join(ANSWER_TIMEOUT_S + 1)
        if self.lost is not None:
            log.error("run %s: records not relayed: %s", self.ctx.run_uid, self.lost)

    def _batch(self) -> list[tuple[str, tuple[Any, ...]]]:
        batch: list[tuple[str, tuple[Any, ...]]] = []
        while self._queue and len(batch) < BATCH_RECORDS:
            batch.append(self._queue.popleft())
        if batch:
            with self._room:
                self._room.notify_all()
        return batch

    def _run(self) -> None:
        client = RequestClient(self.endpoint, peer="the command", credentials=self.ctx.credentials,
                               sender=self.ctx.run_uid)
        try:
            while True:
                closing = self._closing.wait(RELAY_EVERY_S)
                while True:
                    batch = self._batch()
                    self._send(client, batch)
                    if not self._queue:
                        break
                if closing:
                    return
        except MosaicError as error:
            self.lost = str(error)
            self.ctx.cancelled.set()  # the command is gone: nobody records or waits for this run
        finally:
            client.close()
            with self._room:  # a caller waiting for room goes on: nothing is sent any more
                self._room.notify_all()

    def _send(self, client: RequestClient, batch: list[tuple[str, tuple[Any, ...]]]) -> None:
        # Packed here, on the relay's thread, as one value: the command's transport then
        # decodes only bytes, and its RecordSink the records, off the command's main thread.
        records = (pack(batch),) if batch else ()
        request = RunRecordsRequest(self.ctx.run_uid, self.node, records,
                                    snapshot(self.ctx.progress))
        answer = client.request(request, RunRecordsResponse, ANSWER_TIMEOUT_S)
        if answer.cancel and not self.ctx.cancelled.is_set():
            log.info("run %s: cancelled by the command", self.ctx.run_uid)
            self.ctx.cancelled.set()
