"""The half of the store writer's thread that deals with a store that refuses writes: the
spill file its backlog grows into, the outage's clock, and the loss of the store (see
:mod:`mosaic.store._writer_thread`)."""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from mosaic.core.errors import StoreError, StoreLost
from mosaic.store._batch import METRICS, STEPS, Batch
from mosaic.store._outage import FULL, FULL_GRACE_S, Outage
from mosaic.store._spill import CHECK, RUN, SpillFile
from mosaic.store._writer_state import (
    PendingCall,
    SpilledRecords,
    WriteFailed,
    WriterState,
    bump,
    log,
)
from mosaic.store.url import describe_error

#: How often the log says again that the store still refuses writes.
REPORT_EVERY_S = 10.0


class OutageMixin(WriterState):
    """Spilling the backlog, counting an outage, and giving the store up."""

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
            self._stats = bump(self._stats, rows_spilled=self._stats.rows_spilled + rows)
        if self._lost is not None or not mark:
            return  # nothing of the backlog is written any more
        tail = self._backlog[-1] if self._backlog else None
        if isinstance(tail, SpilledRecords) and tail.end == start:
            tail.end, tail.rows = spill.end, tail.rows + rows
        else:
            self._backlog.append(SpilledRecords(start, spill.end, rows))

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

    # -- outages -----------------------------------------------------------------------------

    def _failed(self, failure: WriteFailed) -> None:
        reason = describe_error(failure.exc, self._location.url)
        outage = self._outage
        if outage is None:
            outage = self._outage = Outage(failure.kind, reason)
            grace = min(self._outage_s, FULL_GRACE_S) if failure.kind == FULL else self._outage_s
            log.warning("store %s: a write failed (%s); trying again for up to %g s, keeping "
                        "every record meanwhile", self.location, reason, grace)
        outage.failed(failure.kind, reason)
        with self._lock:
            self._stats = bump(self._stats, retries=self._stats.retries + 1)
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
                                       if isinstance(entry, SpilledRecords))

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
            elif not isinstance(entry, SpilledRecords):
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
        password = "" if self._location.path is not None else ", its password for the ***"
        return StoreLost(
            f"store {self.location} lost: {why}; {unwritten} records not written are kept in "
            f"{spill.path} (once the store is back: mosaic store recover {spill.path} "
            f"--store {self.location}{password})", str(spill.path), unwritten)

    def _fail_backlog(self) -> None:
        """With the store lost: answer every call and flush in the backlog with the loss."""
        lost = self._lost if self._lost is not None else StoreError("the store is lost")
        while self._backlog:
            entry = self._backlog.popleft()
            if isinstance(entry, PendingCall):
                if entry.started or entry.result.set_running_or_notify_cancel():
                    entry.result.set_exception(lost)
            elif isinstance(entry, Future) and entry.set_running_or_notify_cancel():
                entry.set_exception(lost)


def _unit_rows(kind: int, params: Any) -> int:
    return len(params) if kind in (STEPS, METRICS) else 0 if kind in (RUN, CHECK) else 1
