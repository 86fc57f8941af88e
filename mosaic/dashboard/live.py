"""The live channel: server-sent events fed by the store.

One :class:`StoreWatcher` per dashboard polls the store every ``interval`` seconds while a page
listens, and tells each listener which runs changed since its last event: a new run, a new
transition, episode or metric row, a new status (``failed`` and ``cancelled`` included), or a
running run whose process is gone (``interrupted``, which is computed, never stored). Each poll
reads a handful of rows by primary key, however large the store, so an idle dashboard costs
nearly nothing. The pages then fetch what they show of those runs.

:func:`event_stream` turns a source of events into the ``text/event-stream`` body, with a
comment every few seconds so that proxies and the browser keep the connection open.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import sqlalchemy as sa
from starlette.concurrency import run_in_threadpool

from mosaic.core.errors import StoreError
from mosaic.core.run_states import RunStatus
from mosaic.store import Store, schema

__all__ = ["POLL_INTERVAL", "StoreWatcher", "event_stream"]

#: Seconds between two looks at the store while someone listens: a change shows within it.
POLL_INTERVAL = 0.3
_KEEPALIVE = 10.0


class StoreWatcher:
    """Which runs of ``store`` changed, polled while listeners wait (see the module)."""

    def __init__(self, store: Store, interval: float = POLL_INTERVAL) -> None:
        self.store = store
        self.interval = interval
        self._marks: tuple[int, int, int, int] | None = None
        self._statuses: dict[int, str] = {}
        self._listeners: set[asyncio.Queue[set[int]]] = set()
        self._task: asyncio.Task[None] | None = None

    def listen(self) -> asyncio.Queue[set[int]]:
        """A queue that receives the ids of changed runs; give it back with :meth:`leave`."""
        listener: asyncio.Queue[set[int]] = asyncio.Queue()
        self._listeners.add(listener)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())
        return listener

    def leave(self, listener: asyncio.Queue[set[int]]) -> None:
        """Stop sending to ``listener``; polling stops with the last listener."""
        self._listeners.discard(listener)

    async def stop(self) -> None:
        """Stop polling (at shutdown)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        while self._listeners:
            try:
                changed = await run_in_threadpool(self.poll)
            except StoreError:
                changed = set()  # the store is busy or gone for now: look again later
            if changed:
                for listener in list(self._listeners):
                    listener.put_nowait(changed)
            await asyncio.sleep(self.interval)
        self._task = None

    def poll(self) -> set[int]:
        """The ids of the runs that changed since the last poll (none on the first one)."""
        r, t, e = schema.runs, schema.transitions, schema.episodes
        with self.store.reading() as conn:
            has_metrics = sa.inspect(conn).has_table(schema.metrics.name)
            marks = (
                _max_id(conn, r), _max_id(conn, t), _max_id(conn, e),
                _max_id(conn, schema.metrics) if has_metrics else 0,
            )
            statuses = {row.id: row.status for row in conn.execute(sa.select(r.c.id, r.c.status))}
            changed: set[int] = set()
            if self._marks is not None:
                for table, before, now in ((t, self._marks[1], marks[1]),
                                           (e, self._marks[2], marks[2]),
                                           (schema.metrics, self._marks[3], marks[3])):
                    if now > before:
                        changed |= set(conn.execute(
                            sa.select(table.c.run_id).where(table.c.id > before).distinct()
                        ).scalars())
        running = [run for run, status in statuses.items() if status == RunStatus.RUNNING]
        if running:  # a run whose process vanished reads as interrupted
            statuses.update({s.id: s.status for s in self.store.list_runs(ids=running)})
        if self._marks is not None:
            changed |= {run for run, status in statuses.items()
                        if self._statuses.get(run) != status}
        self._marks, self._statuses = marks, statuses
        return changed


def _max_id(conn: sa.Connection, table: sa.Table) -> int:
    return int(conn.execute(sa.select(sa.func.max(table.c.id))).scalar() or 0)


async def event_stream(
    next_event: Callable[[], Awaitable[tuple[str, Any] | None]],
    closing: threading.Event,
    on_close: Callable[[], None] | None = None,
) -> AsyncIterator[str]:
    """Server-sent events: ``next_event()`` gives ``(name, data)``, or None for nothing new
    within a second (a keep-alive comment follows after a while). The stream ends once
    ``closing`` is set (the server is shutting down); ``on_close`` runs when it ends or the
    client goes.
    """
    try:
        yield "retry: 1000\n\n"
        waited = 0.0
        while not closing.is_set():
            event = await next_event()
            if event is None:
                waited += 1.0
                if waited >= _KEEPALIVE:
                    waited = 0.0
                    yield ": keep-alive\n\n"
                continue
            waited = 0.0
            name, data = event
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n"
    finally:
        if on_close is not None:
            on_close()
