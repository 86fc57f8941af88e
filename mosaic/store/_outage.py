"""What the store writer makes of a failed write: wait and retry, or give up on the store.

A write fails for one of three reasons, told apart by :func:`classify`:

- the database went away or is busy (a server restart, a dropped connection, a SQLite file
  locked by another program): :data:`TRANSIENT`, retried with backoff for ``outage_s``;
- its disk is full: :data:`FULL`, retried only for :data:`FULL_GRACE_S`, since a full disk rarely
  frees itself and every second spent on it is a second of steps going to the spill file;
- the records themselves are refused (a constraint, a value the column does not take):
  :data:`REFUSED`, which no retry can change.

:class:`Outage` keeps the clock of one outage: since when, how many tries, when to try next.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field

import sqlalchemy as sa

TRANSIENT, FULL, REFUSED = "transient", "full", "refused"

#: How long a full disk is retried before the store is given up on.
FULL_GRACE_S = 5.0
#: The first wait after a failed write, and the longest; each failure doubles it.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 2.0

# SQLSTATE class 53 (insufficient resources): 53100 disk full, 53200 out of memory.
_PG_DISK_FULL = "53100"


def classify(exc: BaseException) -> str:
    """:data:`TRANSIENT`, :data:`FULL` or :data:`REFUSED`: what a retry of the write may do."""
    if isinstance(exc, sa.exc.IntegrityError):
        return REFUSED
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    if getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or (
            getattr(orig, "sqlstate", None) == _PG_DISK_FULL):
        return FULL
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return TRANSIENT
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError,
                        sa.exc.DisconnectionError, sa.exc.InternalError)):
        return TRANSIENT
    if isinstance(orig, (sqlite3.OperationalError, ConnectionError, TimeoutError)):
        return TRANSIENT
    return REFUSED


@dataclass
class Outage:
    """One stretch of failed writes, from the first failure until a write succeeds."""

    kind: str
    reason: str
    since: float = field(default_factory=time.monotonic)
    tries: int = 0
    next_try: float = 0.0
    #: When it was last said in the log that the store is still unreachable.
    reported: float = field(default_factory=time.monotonic)

    def failed(self, kind: str, reason: str) -> None:
        """Count a failed try; the next one waits twice as long as the last (up to a limit)."""
        self.kind, self.reason = kind, reason
        self.tries += 1
        backoff = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (self.tries - 1))
        self.next_try = time.monotonic() + backoff

    def lasted(self) -> float:
        return time.monotonic() - self.since

    def over(self, outage_s: float) -> bool:
        """True once the store is to be given up on: ``outage_s`` passed (a shorter grace for a
        full disk)."""
        limit = min(outage_s, FULL_GRACE_S) if self.kind == FULL else outage_s
        return self.lasted() >= limit

    def wait(self) -> float:
        """Seconds until the next try."""
        return max(0.0, self.next_try - time.monotonic())
