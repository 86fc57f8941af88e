"""A run's records on their way from a Ray node to the one store writer, with the command.

On the node, :class:`RecordRelay` stands in for the store writer: the run's components record
into it as they would into the writer (nothing blocks), and a thread of its own sends what
piled up, with the run's progress counters, every :data:`RELAY_EVERY_S` over mosaic's ZeroMQ
transport (tcp, CURVE with the run's keys). The command answers each batch once it has handed
it to its writer, and says whether the run is cancelled. In the command, :func:`apply` hands
a batch to the writer and updates the run's progress, which the command's display reads.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from mosaic.conductors.run_context import RECENT_EPISODES, Progress, RunContext, RunRecords
from mosaic.core.errors import MosaicError
from mosaic.messages import RunRecordsRequest, RunRecordsResponse
from mosaic.messages.relay import RECORD_KINDS
from mosaic.transport import RequestClient

__all__ = ["RELAY_EVERY_S", "RecordRelay", "apply"]

log = logging.getLogger(__name__)

#: How often a run on a node sends its records (and says it is alive).
RELAY_EVERY_S = 0.1
#: How long the command may take to answer one batch before the run gives up on it and cancels.
ANSWER_TIMEOUT_S = 30.0
#: The most records in one batch (a frame stays far below the codec's limit).
BATCH_RECORDS = 256

_PROGRESS_FIELDS = ("episodes", "steps", "episodes_total", "return_sum", "last_return",
                    "digest", "chain", "first_step_at", "last_step_at")


def snapshot(progress: Progress) -> dict[str, Any]:
    """``progress`` as plain data."""
    plain: dict[str, Any] = {name: getattr(progress, name) for name in _PROGRESS_FIELDS}
    plain["agent_return_sums"] = dict(progress.agent_return_sums)
    plain["positions"] = {uid: list(at) for uid, at in progress.positions.items()}
    plain["recent_returns"] = list(progress.recent_returns)
    plain["agent_recent_returns"] = {agent: list(recent) for agent, recent
                                     in list(progress.agent_recent_returns.items())}
    return plain


def apply(request: RunRecordsRequest, store: RunRecords, ctx: RunContext) -> None:
    """Hand ``request``'s records to ``store`` (for ``ctx``'s run only) and take its progress
    into ``ctx.progress``. A record of another run or of an unknown kind is dropped and logged."""
    for item in request.records:
        try:
            kind, args = item
            if kind not in RECORD_KINDS:
                raise ValueError(f"unknown record kind {kind!r}")
            if kind in ("transition", "episode") and args[0] != ctx.run_id:
                raise ValueError(f"a record of run id {args[0]}, not {ctx.run_id}")
            if kind in ("steps", "metrics"):
                args = ([row for row in args[0] if row[0] == ctx.run_id],)
            getattr(store, f"record_{kind}")(*args)
        except (ValueError, TypeError, IndexError) as error:
            log.error("run %s: a relayed record was dropped: %s", ctx.run_uid, error)
    fields = request.progress
    progress = ctx.progress
    for name in _PROGRESS_FIELDS:
        if name in fields:
            setattr(progress, name, fields[name])
    progress.agent_return_sums = dict(fields.get("agent_return_sums", {}))
    progress.positions = {uid: (int(at[0]), int(at[1]), int(at[2]))
                          for uid, at in fields.get("positions", {}).items()}
    progress.recent_returns.clear()
    progress.recent_returns.extend(fields.get("recent_returns", ()))
    progress.agent_recent_returns = {
        agent: deque(recent, maxlen=RECENT_EPISODES)
        for agent, recent in fields.get("agent_recent_returns", {}).items()}


class RecordRelay:
    """The store writer of a run on a Ray node: records go to the command at ``endpoint``.

    :meth:`start` starts the sending thread; :meth:`close` sends what is left (and the final
    progress) and ends it, within :data:`ANSWER_TIMEOUT_S`. When the command asks for it, or
    stops answering, the run's ``cancelled`` is set.
    """

    def __init__(self, endpoint: str, ctx: RunContext, node: str) -> None:
        self.endpoint = endpoint
        self.ctx = ctx
        self.node = node
        self._queue: deque[tuple[str, tuple[Any, ...]]] = deque()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"relay-{ctx.run_uid}",
                                        daemon=True)
        self.lost: str | None = None

    # -- the writer's interface (see RunRecords) ----------------------------------------------
    @property
    def queued(self) -> int:
        return len(self._queue)

    def record_steps(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self._queue.append(("steps", (list(rows),)))

    def record_metrics(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self._queue.append(("metrics", (list(rows),)))

    def record_transition(self, run_id: int, from_state: str | None, to_state: str,
                          reason: str | None) -> None:
        self._queue.append(("transition", (run_id, from_state, to_state, reason)))

    def record_episode(self, run_id: int, environment: str, episode: int, steps: int,
                       total_return: float | None, returns: Mapping[str, float],
                       terminated: bool, truncated: bool, seed: int | None, copy: int = 0,
                       evaluation: bool = False,
                       snapshots: Mapping[str, int] | None = None,
                       chain: str | None = None) -> None:
        self._queue.append(("episode", (run_id, environment, episode, steps, total_return,
                                        dict(returns), terminated, truncated, seed, copy,
                                        evaluation,
                                        None if snapshots is None else dict(snapshots),
                                        chain)))

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

    def _send(self, client: RequestClient, batch: list[tuple[str, tuple[Any, ...]]]) -> None:
        request = RunRecordsRequest(self.ctx.run_uid, self.node, tuple(batch),
                                    snapshot(self.ctx.progress))
        answer = client.request(request, RunRecordsResponse, ANSWER_TIMEOUT_S)
        if answer.cancel and not self.ctx.cancelled.is_set():
            log.info("run %s: cancelled by the command", self.ctx.run_uid)
            self.ctx.cancelled.set()
