"""The ``pruned`` status of a search's run: a store made before it existed admits it once its
next writer opens it, keeps every row, and still refuses a status mosaic does not have."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from mosaic.store import open_store
from tests.store.test_writer import make_writer, new_run

pytestmark = pytest.mark.timeout(60)


def _without_pruned(path) -> None:
    """The runs table as a store made before ``pruned`` has it (SQLite's table rebuild)."""
    with closing(sqlite3.connect(path)) as db:
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
        assert ", 'pruned'" in sql
        db.execute("PRAGMA foreign_keys = OFF")
        db.execute(sql.replace(", 'pruned'", "").replace("CREATE TABLE runs",
                                                         "CREATE TABLE runs_before", 1))
        db.execute("INSERT INTO runs_before SELECT * FROM runs")
        db.execute("DROP TABLE runs")
        db.execute("ALTER TABLE runs_before RENAME TO runs")
        db.commit()
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("UPDATE runs SET status = 'pruned'")


def test_a_store_made_before_the_pruned_status_admits_it_from_its_next_writer(
        tmp_path, writers):
    path = tmp_path / "old.sqlite"
    writer = make_writer(writers, path)
    first = new_run(writer)
    writer.run_finished(first, "finished", None, 1, 4)
    writer.close(timeout=5)
    _without_pruned(path)

    writer = make_writer(writers, path)
    second = new_run(writer, "run-2")
    writer.run_finished(second, "pruned", None, 2, 9)
    writer.close(timeout=5)
    with open_store(path) as store:
        assert [(run.uid, run.status, run.steps) for run in store.list_runs()] == [
            ("run-1", "finished", 4), ("run-2", "pruned", 9)]
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("UPDATE runs SET status = 'skipped'")


def test_a_postgresql_store_made_before_the_pruned_status_admits_it_too(server, database,
                                                                        writers):
    url = server.url(database)
    writer = make_writer(writers, url)
    writer.run_finished(new_run(writer), "finished", None, 1, 4)
    writer.close(timeout=5)
    import psycopg

    with psycopg.connect(url, connect_timeout=20) as conn:  # as a store made before it is
        conn.execute("ALTER TABLE runs DROP CONSTRAINT ck_runs_status")
        conn.execute("ALTER TABLE runs ADD CONSTRAINT ck_runs_status CHECK (status IN "
                     "('created', 'running', 'finished', 'failed', 'cancelled'))")

    writer = make_writer(writers, url)
    second = new_run(writer, "run-2")
    writer.run_finished(second, "pruned", None, 2, 9)
    writer.close(timeout=5)
    with open_store(url) as store:
        assert [(run.uid, run.status) for run in store.list_runs()] == [
            ("run-1", "finished"), ("run-2", "pruned")]
