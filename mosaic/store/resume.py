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
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from mosaic.core.run_states import RunStatus
from mosaic.store import schema
from mosaic.store._batch import INSERT_TRANSITION

__all__ = ["RestartPoint", "StoredExperiment", "StoredRun", "file_hash", "find_experiment",
           "restart_run"]

#: The state a resumed run's transition goes to.
RESUMED = "resumed"


def file_hash(text: str) -> str:
    """The hash an experiment's file text is recorded with (SHA-256, hex)."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class StoredRun:
    """A run of a stored experiment, as its row says.

    ``status`` is the row's text, not a :class:`~mosaic.core.run_states.RunStatus`: a store written
    by a later mosaic may hold a status this one does not know, and that run is resumed too.
    """

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
        if self.status != RunStatus.RUNNING or self.pid is None or self.pid == os.getpid():
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


@dataclass(frozen=True)
class RestartPoint:
    """Where a restarted run continues: its first episode (0: from its start), the digest chain
    once the episode before ended (hex; "" from the start), and the steps and the returns (in
    order) of the training episodes it keeps."""

    episode: int = 0
    chain: str = ""
    steps: int = 0
    returns: tuple[float, ...] = ()


def restart_run(conn: sa.Connection, run: StoredRun, reason: str,
                environment: str | None = None, episodes: Sequence[int] = ()) -> RestartPoint:
    """Make ``run`` run again in its own row: from the first of ``episodes`` (of
    ``environment``, its only one) whose episode before the store holds with its digest chain
    (its checkpoints may be ahead of the store), or from its start. Remove its steps, episodes
    and metrics from there on, set it running in this process, and record a ``resumed``
    transition (``reason``, and from which episode)."""
    point = RestartPoint()
    e = schema.episodes
    for episode in episodes if environment is not None else ():
        if episode <= 0:
            continue
        chain = conn.execute(sa.select(e.c.chain).where(
            e.c.run_id == run.id, e.c.environment == environment,
            e.c.episode == episode - 1, e.c.evaluation.is_(False))).scalar_one_or_none()
        if chain:
            kept = conn.execute(sa.select(e.c.steps, e.c.total_return).where(
                e.c.run_id == run.id, e.c.episode < episode, e.c.evaluation.is_(False))
                .order_by(e.c.episode)).all()
            point = RestartPoint(episode, str(chain), sum(int(r.steps) for r in kept),
                                 tuple(float(r.total_return or 0.0) for r in kept))
            break
    for table in (schema.steps, schema.episodes, schema.metrics):
        where = table.c.run_id == run.id
        if point.episode:
            where = where & (table.c.episode >= point.episode)
        conn.execute(sa.delete(table).where(where))
    now = time.time()
    conn.execute(sa.update(schema.runs).where(schema.runs.c.id == run.id).values(
        status=RunStatus.RUNNING.value, started_at=now, ended_at=None, error=None,
        episodes=len(point.returns), steps=point.steps, digest=None, heartbeat_at=now,
        pid=os.getpid(), hostname=socket.gethostname()))
    where_from = (f"from episode {point.episode} (its checkpoint)" if point.episode
                  else "from episode 0")
    conn.execute(INSERT_TRANSITION, {"p_run": run.id, "p_from": run.status, "p_to": RESUMED,
                                     "p_reason": f"{reason} {where_from}", "p_at": now})
    return point
