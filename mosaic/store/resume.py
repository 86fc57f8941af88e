"""What ``mosaic experiment-start --resume`` reads and changes in the store.

An experiment is recorded with its file's text and hash and the prefix of its runs' uids
(:func:`record_experiment`), so a later command can find it again (:func:`find_experiment`),
tell whether it is given the same file, and continue each run that did not finish in its own
row (:func:`restart_run`): the rows the run wrote after the point it continues from are removed,
and a ``resumed`` transition says from where. These run on the store writer's thread (see
:meth:`~mosaic.store.writer.StoreWriter.find_experiment`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass, field

import sqlalchemy as sa

from mosaic.store import schema
from mosaic.store._batch import INSERT_TRANSITION

__all__ = ["StoredExperiment", "StoredRun", "file_hash", "find_experiment", "restart_run"]

#: The state a resumed run's transition goes to.
RESUMED = "resumed"


def file_hash(text: str) -> str:
    """The hash an experiment's file text is recorded with (SHA-256, hex)."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class StoredRun:
    """A run of a stored experiment, as its row says."""

    id: int
    uid: str
    index: int
    status: str
    episodes: int
    steps: int
    digest: str | None
    pid: int | None
    hostname: str | None
    heartbeat_at: float | None

    def alive_here(self) -> bool:
        """Whether the run's row says running and its process is alive on this host (another
        command still runs it)."""
        if self.status != "running" or self.pid is None or self.pid == os.getpid():
            return False
        if self.hostname != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


@dataclass(frozen=True)
class StoredExperiment:
    """An experiment that can be resumed: its id, file text and hash, run prefix, and runs by
    uid."""

    id: int
    uid: str
    text: str
    hash: str
    run_prefix: str
    runs: dict[str, StoredRun] = field(default_factory=dict)


def find_experiment(conn: sa.Connection, uid: str) -> StoredExperiment | None:
    """The latest experiment ``uid`` recorded with its file's text (None if there is none)."""
    e = schema.experiments
    row = conn.execute(
        sa.select(e.c.id, e.c.text, e.c.hash, e.c.run_prefix)
        .where(e.c.uid == uid, e.c.text.is_not(None), e.c.run_prefix.is_not(None))
        .order_by(e.c.created_at.desc(), e.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    r = schema.runs
    runs = {
        str(run.uid): StoredRun(int(run.id), str(run.uid), int(run.run_index), str(run.status),
                                int(run.episodes), int(run.steps), run.digest, run.pid,
                                run.hostname, run.heartbeat_at)
        for run in conn.execute(
            sa.select(r.c.id, r.c.uid, r.c.run_index, r.c.status, r.c.episodes, r.c.steps,
                      r.c.digest, r.c.pid, r.c.hostname, r.c.heartbeat_at)
            .where(r.c.experiment_id == row.id))
    }
    return StoredExperiment(int(row.id), uid, str(row.text), str(row.hash),
                            str(row.run_prefix), runs)


def restart_run(conn: sa.Connection, run: StoredRun, reason: str) -> None:
    """Make ``run`` run again from its start in its own row: remove its steps, episodes and
    metrics, set it running in this process, and record a ``resumed`` transition."""
    for table in (schema.steps, schema.episodes, schema.metrics):
        conn.execute(sa.delete(table).where(table.c.run_id == run.id))
    now = time.time()
    conn.execute(sa.update(schema.runs).where(schema.runs.c.id == run.id).values(
        status="running", started_at=now, ended_at=None, error=None, episodes=0, steps=0,
        digest=None, heartbeat_at=now, pid=os.getpid(), hostname=socket.gethostname()))
    conn.execute(INSERT_TRANSITION, {"p_run": run.id, "p_from": run.status, "p_to": RESUMED,
                                     "p_reason": reason, "p_at": now})
