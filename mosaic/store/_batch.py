"""What the store writer's queue carries, and what one commit writes.

Callers enqueue ``(kind, payload)`` items; the writer thread converts the payloads to statement
parameters, gathers them in a :class:`Batch` and writes the batch with the statements below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import schema
from mosaic.store._values import Encode

StepRow = tuple[Any, ...]
"""``(run_id, environment, episode, step, agent, slot, observation, action, reward, terminated,
truncated, copy, info)``; observation, action and info are raw Python/NumPy values, encoded by
the writer thread. ``copy`` (the copy of an environment with ``copies:``) may be left out: it is
then 0; so may ``info`` (the chosen keys of the step's info, or None): it is then None."""

MetricRow = tuple[Any, ...]
"""``(run_id, agent, source, name, value, episode, step, at)``: one metric a brain or muscle
reported (``source``, its uid), with the run's episodes ended and steps taken at the time, and
the time it was reported (seconds since the epoch)."""


# Kinds of queued items.
STEPS, TRANSITION, EPISODE, FINISH, CALL, FLUSH, STOP, METRICS, CHECKPOINT, VIDEO = range(10)

_next_seq = (
    sa.select(sa.func.coalesce(sa.func.max(schema.transitions.c.seq), 0) + 1)
    .where(schema.transitions.c.run_id == sa.bindparam("p_run"))
    .scalar_subquery()
)
# The sequence number comes from the database, so it stays right whoever wrote the earlier ones.
INSERT_TRANSITION = sa.insert(schema.transitions).values(
    run_id=sa.bindparam("p_run"),
    seq=_next_seq,
    from_state=sa.bindparam("p_from"),
    to_state=sa.bindparam("p_to"),
    reason=sa.bindparam("p_reason"),
    at=sa.bindparam("p_at"),
)
FINISH_RUN = (
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
        started_at=sa.func.coalesce(sa.bindparam("p_started", type_=sa.Double),
                                    schema.runs.c.started_at),
    )
)


class Batch:
    """Everything drained since the last commit, converted to statement parameters.

    ``units`` keeps one entry per queued item so that a batch refused for a constraint can be
    retried item by item, losing only the offending items.
    """

    __slots__ = ("checkpoints", "episodes", "finishes", "metrics", "seq", "steps", "transitions",
                 "tried", "units", "videos")

    def __init__(self) -> None:
        #: Its number among the writer's transactions, and whether a commit was tried: a
        #: retry first asks the store whether that commit happened after all.
        self.seq = 0
        self.tried = False
        self.steps: list[tuple[Any, ...]] = []
        self.transitions: list[dict[str, Any]] = []
        self.episodes: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.finishes: list[dict[str, Any]] = []
        self.checkpoints: list[dict[str, Any]] = []
        self.videos: list[dict[str, Any]] = []
        self.units: list[tuple[int, Any]] = []

    def add(self, kind: int, params: Any) -> None:
        self.units.append((kind, params))
        if kind == STEPS:
            self.steps.extend(params)
        elif kind == TRANSITION:
            self.transitions.append(params)
        elif kind == EPISODE:
            self.episodes.append(params)
        elif kind == METRICS:
            self.metrics.extend(params)
        elif kind == CHECKPOINT:
            self.checkpoints.append(params)
        elif kind == VIDEO:
            self.videos.append(params)
        else:
            self.finishes.append(params)

    def rows(self) -> int:
        return (len(self.steps) + len(self.transitions) + len(self.episodes) + len(self.metrics)
                + len(self.finishes) + len(self.checkpoints) + len(self.videos))

    def split(self) -> list[Batch]:
        parts = []
        for kind, params in self.units:
            part = Batch()
            part.add(kind, params)
            parts.append(part)
        return parts


def steps_insert(engine: sa.Engine) -> str | None:
    """The driver's own statement for step rows in :data:`schema.STEP_COLUMNS` order, which
    :func:`write_batch` runs with the driver itself: on SQLite an ``INSERT`` for ``executemany``
    (several times faster than Core's per-row parameter processing), on PostgreSQL through
    psycopg a ``COPY ... FROM STDIN`` (several times faster than any ``INSERT``); None for
    another database or driver (Core's insert serves it). Raises StoreError if the table's
    columns are not what the statement expects.

    The COPY is in text format: the server parses and checks every value as it does an
    INSERT's. Binary COPY is barely faster and trusts the client's types: psycopg's int4 sends
    the low 32 bits of a larger int, which would store a wrong episode without a word.
    """
    dialect = engine.dialect
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        return f"COPY steps ({', '.join(schema.STEP_COLUMNS)}) FROM STDIN"
    if dialect.name != "sqlite":
        return None
    compiled = sa.insert(schema.steps).compile(dialect=dialect,
                                               column_keys=list(schema.STEP_COLUMNS))
    if tuple(compiled.positiontup or ()) != schema.STEP_COLUMNS:
        raise StoreError("unexpected column order in the compiled steps insert")
    return str(compiled)


def _copy_steps(conn: sa.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """COPY ``rows`` into the steps table in ``conn``'s transaction (PostgreSQL, psycopg).

    A driver error is raised as SQLAlchemy raises it for its own statements (an IntegrityError
    for a constraint, an OperationalError for a lost connection, which is then invalidated), so
    that the writer tells refused records from an outage as it does for an ``INSERT``.
    """
    fairy = conn.connection
    driver: Any = fairy.driver_connection
    dbapi_error: Any = conn.dialect.loaded_dbapi.Error
    try:
        with driver.cursor() as cursor, cursor.copy(sql) as copy:
            write_row = copy.write_row
            for row in rows:
                write_row(row)
    except dbapi_error as exc:
        lost = conn.dialect.is_disconnect(exc, fairy.dbapi_connection, None)
        error = sa.exc.DBAPIError.instance(sql, None, exc, dbapi_error,
                                           connection_invalidated=lost, dialect=conn.dialect)
        if lost:
            conn.invalidate(exc)
        raise error from exc


def write_batch(conn: sa.Connection, batch: Batch, steps_sql: str | None) -> list[int]:
    """Execute ``batch`` in ``conn``'s transaction; return the ids of runs it finishes that the
    store does not hold (a finish then changes nothing).

    Runs' children first, run ends last: a run is never seen finished without the steps that
    were enqueued before its end. ``steps_sql`` is :func:`steps_insert`'s.
    """
    if batch.transitions:
        conn.execute(INSERT_TRANSITION, batch.transitions)
    if batch.steps:
        if steps_sql is None:
            keys = schema.STEP_COLUMNS
            conn.execute(sa.insert(schema.steps),
                         [dict(zip(keys, row, strict=True)) for row in batch.steps])
        elif conn.dialect.name == "postgresql":
            _copy_steps(conn, steps_sql, batch.steps)
        else:
            conn.exec_driver_sql(steps_sql, batch.steps)
    if batch.episodes:
        conn.execute(sa.insert(schema.episodes), batch.episodes)
    if batch.metrics:
        conn.execute(sa.insert(schema.metrics), batch.metrics)
    for saved in batch.checkpoints:  # the latest version of a file replaces the one before
        table = schema.checkpoints
        conn.execute(sa.delete(table).where(table.c.run_id == saved["run_id"],
                                            table.c.name == saved["name"]))
        conn.execute(sa.insert(table), saved)
    for video in batch.videos:  # a run continued records its videos again
        table = schema.videos
        conn.execute(sa.delete(table).where(table.c.run_id == video["run_id"],
                                            table.c.environment == video["environment"],
                                            table.c.episode == video["episode"]))
        conn.execute(sa.insert(table), video)
    if batch.finishes:
        result = conn.execute(FINISH_RUN, batch.finishes)
        if conn.dialect.supports_sane_multi_rowcount and result.rowcount < len(batch.finishes):
            ids = sorted({p["p_id"] for p in batch.finishes})
            held = set(conn.execute(sa.select(schema.runs.c.id)
                                    .where(schema.runs.c.id.in_(ids))).scalars())
            return [run for run in ids if run not in held]
    return []


def set_meta(conn: sa.Connection, key: str, value: str) -> None:
    """Set ``key`` of the store's ``meta`` table to ``value`` in ``conn``'s transaction."""
    meta = schema.meta
    updated = conn.execute(sa.update(meta).where(meta.c.key == key).values(value=value))
    if updated.rowcount == 0:
        conn.execute(sa.insert(meta).values(key=key, value=value))


def get_meta(conn: sa.Connection, key: str) -> str | None:
    """The value of ``key`` in the store's ``meta`` table, or None."""
    meta = schema.meta
    found = conn.execute(sa.select(meta.c.value).where(meta.c.key == key)).scalar_one_or_none()
    return None if found is None else str(found)


def delete_meta(conn: sa.Connection, key: str) -> None:
    conn.execute(sa.delete(schema.meta).where(schema.meta.c.key == key))


def step_params(rows: Sequence[StepRow], encode: Encode) -> list[tuple[Any, ...]]:
    """Statement parameters of step ``rows``, observation and action encoded with ``encode``.

    Raises whatever a bad row raises: a wrong length, or a value that does not convert or encode.
    """
    if not rows:
        return []
    # One comprehension for the rows the step loop makes (all 13 fields): no call per row but
    # the conversions'. Rows of another length go through _step_param, which takes any.
    if len(rows[0]) == len(schema.STEP_COLUMNS):
        return [(int(run), env, int(ep), int(st), agent, slot, encode(obs), encode(act),
                 float(rew), bool(term), bool(trunc), int(copy),
                 None if info is None else encode(info))
                for run, env, ep, st, agent, slot, obs, act, rew, term, trunc, copy, info in rows]
    return [_step_param(encode, *row) for row in rows]


def metric_param(run: Any, agent: Any, source: Any, name: Any, value: Any, episode: Any,
                 step: Any, at: Any) -> dict[str, Any]:
    """Statement parameters of one :data:`MetricRow`; raises whatever a bad row raises."""
    return {"run_id": int(run), "agent": str(agent), "source": str(source), "name": str(name),
            "value": float(value), "episode": None if episode is None else int(episode),
            "step": None if step is None else int(step), "at": float(at)}


def _step_param(encode: Encode, run: Any, env: Any, ep: Any, st: Any, agent: Any, slot: Any,
                obs: Any, act: Any, rew: Any, term: Any, trunc: Any,
                copy: Any = 0, info: Any = None) -> tuple[Any, ...]:
    return (int(run), env, int(ep), int(st), agent, slot, encode(obs), encode(act), float(rew),
            bool(term), bool(trunc), int(copy), None if info is None else encode(info))
