"""A store of schema version 1 (before ``copies:``), 2 (before sweeps), 3 (before evaluation
episodes), 4 (before self-play snapshots), 5 (before stored infos) or 7 (before the agents of
each run) is upgraded in place by its next writer, keeping every row, and a reader asked to
open it first says how it gets upgraded."""

from __future__ import annotations

import pickle
import sqlite3
from contextlib import closing

import pytest

from mosaic.core.errors import StoreError
from mosaic.messages import pack
from mosaic.store import SCHEMA_VERSION, open_store
from tests.store.test_writer import make_writer, new_run

#: What each schema version added: (table, column) pairs, dropped to go back below it.
ADDED_IN = {8: [("runs", "agents")],
            7: [("experiments", "text"), ("experiments", "hash"), ("experiments", "run_prefix"),
                ("episodes", "chain")],
            6: [("steps", "info")], 5: [("episodes", "snapshots")],
            4: [("episodes", "evaluation")], 3: [("runs", "params")],
            2: [("episodes", "copy"), ("steps", "copy")]}


def _downgrade(path, version: int) -> None:
    """What a store of ``version`` looks like: none of the columns added after it."""
    with closing(sqlite3.connect(path)) as db:
        for added, columns in ADDED_IN.items():
            if added > version:
                for table, column in columns:
                    db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        db.commit()


def test_a_version_5_store_gets_the_info_column_from_its_next_writer(tmp_path, writers):
    path = tmp_path / "old.sqlite"
    writer = make_writer(writers, path, encode=pack)
    run = new_run(writer)
    writer.record_steps([(run, "env", 0, 0, "a", "p0", 1, 2, 0.5, True, False)])
    writer.close(timeout=5)
    _downgrade(path, 5)

    with pytest.raises(StoreError, match="schema version 5; this mosaic upgrades it"):
        open_store(path)

    writer = make_writer(writers, path, encode=pack)
    run = new_run(writer, "second")
    writer.record_steps([(run, "env", 0, 0, "a", "p0", 1, 2, 0.5, True, False, 0,
                          {"is_success": True})])
    writer.close(timeout=5)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
    with open_store(path) as store:
        assert [[step.info for step in store.steps(run.uid)] for run in store.list_runs()] == [
            [None], [{"is_success": True}]]


@pytest.mark.parametrize(("version", "column", "recorded", "expected"), [
    # Version 4 lacked the snapshots of self-play (null for the older rows).
    (4, "snapshots", {"snapshots": {"past": 50}}, [(7, None), (8, '{"past": 50}')]),
    # Version 3 lacked evaluation episodes (false for the older rows).
    (3, "evaluation", {"evaluation": True}, [(7, 0), (8, 1)]),
])
def test_a_store_gets_the_episodes_column_its_version_lacked_from_its_next_writer(
        tmp_path, writers, version: int, column: str, recorded: dict, expected: list) -> None:
    path = tmp_path / "old.sqlite"
    writer = make_writer(writers, path)
    run = new_run(writer)
    writer.record_episode(run, "env", 0, 1, 0.5, {"p0": 0.5}, True, False, 7)
    writer.close(timeout=5)
    _downgrade(path, version)

    with pytest.raises(StoreError, match=f"schema version {version}; this mosaic upgrades it"):
        open_store(path)

    writer = make_writer(writers, path)
    run = new_run(writer, "second")
    writer.record_episode(run, "env", 0, 1, 0.5, {"p0": 0.5}, True, False, 8, **recorded)
    writer.close(timeout=5)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        assert db.execute(f"SELECT seed, {column} FROM episodes ORDER BY id").fetchall() == (
            expected)


def test_a_version_7_store_gets_the_agents_column_from_its_next_writer(tmp_path, writers):
    path = tmp_path / "old.sqlite"
    writer = make_writer(writers, path)
    zero_sum = {"p0": 1.0, "p1": -1.0}
    run = new_run(writer)
    writer.record_episode(run, "env", 0, 1, 0.0, zero_sum, True, False, 7)
    writer.close(timeout=5)
    _downgrade(path, 7)

    with pytest.raises(StoreError, match="schema version 7; this mosaic upgrades it"):
        open_store(path)

    writer = make_writer(writers, path)
    run = writer.run_started(1, "two-agents", 1, 5, agents={"env": {"p0": "a", "p1": "b"}})
    writer.record_episode(run, "env", 0, 1, 0.0, zero_sum, True, False, 8)
    writer.run_finished(run, "finished", None, 1, 1)
    writer.close(timeout=5)
    with open_store(path) as store:
        # The older run's mapping is unknown: it reads as its total, as it did.
        assert [(run.agent_recent_means, run.recent_mean_return)
                for run in store.list_runs()] == [({}, 0.0), ({"a": 1.0, "b": -1.0}, 0.0)]


def test_a_version_2_store_gets_the_params_column_from_its_next_writer(tmp_path, writers):
    path = tmp_path / "old.sqlite"
    writer = make_writer(writers, path)
    new_run(writer)
    writer.close(timeout=5)
    _downgrade(path, 2)

    with pytest.raises(StoreError, match="schema version 2; this mosaic upgrades it"):
        open_store(path)

    writer = make_writer(writers, path)
    run = writer.run_started(1, "swept", 1, 5, params={"agents.0.params.gamma": 0.9})
    writer.run_finished(run, "finished", None, 0, 0)
    writer.close(timeout=5)
    with open_store(path) as store:
        assert [run.params for run in store.list_runs()] == [{}, {"agents.0.params.gamma": 0.9}]


def test_a_version_1_store_is_upgraded_by_its_next_writer(tmp_path, writers):
    path = tmp_path / "old.sqlite"
    writer = make_writer(writers, path)
    run = new_run(writer)
    writer.record_steps([(run, "env", 0, 0, "a", "p0", 1, 2, 0.5, True, False)])
    writer.record_episode(run, "env", 0, 1, 0.5, {"p0": 0.5}, True, False, 7)
    writer.close(timeout=5)
    _downgrade(path, 1)

    with pytest.raises(StoreError, match="schema version 1; this mosaic upgrades it"):
        open_store(path)

    writer = make_writer(writers, path)
    run = new_run(writer, "second")
    writer.record_steps([(run, "env", 0, 0, "a", "p0", 1, 2, 0.5, True, False, 3)])
    writer.record_episode(run, "env", 0, 1, 0.5, {"p0": 0.5}, True, False, 8, copy=3)
    writer.close(timeout=5)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        assert db.execute("SELECT seed, copy FROM episodes ORDER BY id").fetchall() == [
            (7, 0), (8, 3)]
        assert db.execute("SELECT copy FROM steps ORDER BY id").fetchall() == [(0,), (3,)]
    with open_store(path) as store:
        assert len(store.list_runs()) == 2


def test_step_rows_without_a_copy_are_copy_0(tmp_path, writers):
    path = tmp_path / "store.sqlite"
    writer = make_writer(writers, path, encode=pickle.dumps)
    run = new_run(writer)
    writer.record_steps([(run, "env", 0, 0, "a", "p0", 1, 2, 0.5, False, False),
                         (run, "env", 0, 1, "a", "p0", 1, 2, 0.5, True, False, 1)])
    writer.close(timeout=5)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT step, copy FROM steps ORDER BY id").fetchall() == [(0, 0),
                                                                                    (1, 1)]
