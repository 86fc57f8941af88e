"""The writer's steps on PostgreSQL go through psycopg's COPY: the store holds what SQLite holds,
byte for byte, and records the database refuses are dropped alone, as with an INSERT.

The server is the tests' own (:mod:`tests.e2e.postgres_server`), started once for the module;
each test gets a database of its own. A server that cannot be started fails the tests with the
reason.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import StoreWriter, open_store
from mosaic.store._batch import STEPS, Batch, steps_insert, write_batch
from mosaic.store._outage import TRANSIENT, classify
from mosaic.store.url import locate, open_engine
from tests.e2e import postgres_server
from tests.e2e.postgres_server import Server

pytestmark = pytest.mark.timeout(120)

SELECT_STEPS = ("SELECT run_id, environment, episode, step, agent, slot, observation, action, "
                "reward, terminated, truncated, copy, info FROM steps ORDER BY id")


def start_writer(writers: list[StoreWriter], target: str | Path) -> tuple[StoreWriter, int]:
    writer = StoreWriter(target, flush_interval=60)
    writers.append(writer)
    writer.start()
    run = writer.run_started(writer.experiment_started("exp", None, {}), "run-1", 0, 1)
    return writer, run


def rows_of_every_shape(run: int) -> list[list[tuple[Any, ...]]]:
    """Calls of rows without copy and info, with copy, with both; small and compressed values."""
    image = np.zeros((64, 64, 3), dtype=np.uint8)  # compressed: far above COMPRESS_ABOVE
    plain = [(run, "env", 0, i, "agent", "p0", np.full(4, i, dtype=np.float32), np.int64(i % 2),
              np.float32(0.5), i == 2, False) for i in range(3)]
    copied = [(run, "env", 1, i, None, "p0", image, i, 1, False, True, 2) for i in range(2)]
    informed = [(run, "env", 2, 0, "agent", None, {"x": (1, 2.5)}, [1, "a"], -1.0, True, True,
                 0, {"lives": np.int8(3)}),
                (run, "env", 2, 1, "agent", "p0", 2**70, None, 0.0, False, False, 1, None)]
    return [plain, copied, informed]


def test_steps_copied_into_postgresql_are_those_sqlite_stores(
        server: Server, tmp_path: Path, writers: list[StoreWriter]) -> None:
    database = server.create_database()
    stored = {}
    for name, target in (("pg", server.url(database)), ("sqlite", tmp_path / "store.db")):
        writer, run = start_writer(writers, target)
        for rows in rows_of_every_shape(run):
            writer.record_steps(rows)
        assert writer.flush(30)
        assert writer.stats.steps_written == 7
        writer.close(10)
        with open_store(target) as store:
            stored[name] = [(r.episode, r.step, r.agent, r.slot, r.reward, r.terminated,
                             r.truncated, repr(r.observation), repr(r.action), repr(r.info))
                            for r in list(store.steps("run-1"))]
    assert stored["pg"] == stored["sqlite"] and len(stored["pg"]) == 7
    assert "dtype=uint8" in stored["pg"][3][7]  # the image, compressed and decoded

    pg_rows = server.query(database, SELECT_STEPS)
    with closing(sqlite3.connect(tmp_path / "store.db")) as db:
        sqlite_rows = db.execute(SELECT_STEPS).fetchall()
    as_bytes = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                for row in pg_rows]
    assert [(*row[:9], bool(row[9]), bool(row[10]), *row[11:]) for row in sqlite_rows] == as_bytes


def test_refused_steps_are_dropped_alone_and_the_writer_carries_on(
        server: Server, writers: list[StoreWriter]) -> None:
    database = server.create_database()
    writer, run = start_writer(writers, server.url(database))
    good = rows_of_every_shape(run)[0]
    writer.record_steps(good)
    writer.record_steps([(run + 7, *row[1:]) for row in good])  # no such run
    writer.record_steps(good)
    with pytest.raises(StoreError, match="ForeignKeyViolation"):
        writer.flush(30)
    assert writer.stats.rows_dropped == 3
    assert server.query(database, "SELECT count(*) FROM steps") == [(6,)]

    # Out of the column's range: the driver refuses it before the server sees it.
    writer.record_steps([(run, "env", 2**40, 0, "a", "p", 0, 0, 0.0, False, False)])
    with pytest.raises(StoreError, match="records failed"):
        writer.flush(30)
    writer.record_steps(good)
    assert writer.flush(30)
    assert server.query(database, "SELECT count(*) FROM steps") == [(9,)]
    assert writer.verify_run(run) == "the store " + writer.location + (
        " holds 9 of 10 steps of this run (see the log for the writer's errors)")


def test_steps_copied_while_the_server_restarts_are_written_once_it_is_back(
        server: Server, writers: list[StoreWriter]) -> None:
    database = server.create_database()
    writer, run = start_writer(writers, server.url(database))
    good = rows_of_every_shape(run)[0]
    writer.record_steps(good)
    assert writer.flush(30)
    postgres_server.halt(server)
    try:
        writer.record_steps(good)
        writer.record_steps(good)
        assert not writer.flush(1)  # the COPY fails with the connection, and is kept
    finally:
        postgres_server.resume(server)
    assert writer.flush(60)
    assert writer.stats.retries >= 1 and writer.stats.rows_dropped == 0
    assert server.query(database, "SELECT count(*) FROM steps") == [(9,)]
    assert writer.verify_run(run) is None


def test_a_connection_lost_under_the_copy_is_an_outage_not_refused_records(
        server: Server) -> None:
    database = server.create_database()
    writer = StoreWriter(server.url(database))
    writer.start()
    run = writer.run_started(writer.experiment_started("exp", None, {}), "run-1", 0, 1)
    writer.close(10)
    engine = open_engine(locate(server.url(database)), write=True)
    try:
        batch = Batch()
        batch.add(STEPS, [(run, "env", 0, 0, "a", "p", b"o", b"a", 0.0, False, False, 0, None)])
        with pytest.raises(sa.exc.OperationalError) as raised, engine.begin() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            server.query(database, f"SELECT pg_terminate_backend({pid})")
            write_batch(conn, batch, steps_insert(engine))
        assert raised.value.connection_invalidated
        assert classify(raised.value) == TRANSIENT
        with engine.begin() as conn:  # the pool gives a new connection
            write_batch(conn, batch, steps_insert(engine))
    finally:
        engine.dispose()
    assert server.query(database, "SELECT count(*) FROM steps") == [(1,)]
