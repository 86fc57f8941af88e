"""A store that refuses writes, for real: the SQLite file on a small tmpfs that fills up.

A disk that fills and frees again loses nothing (the records wait, past the buffer in a spill
file, and are written in order); one that stays full loses the store within seconds, keeps
every record in the spill file, and ``recover_spill`` writes them in once there is room. Rows
the writer could not even encode are found by ``verify_run``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.core.errors import StoreError, StoreLost
from mosaic.store import StoreWriter
from mosaic.store._outage import FULL_GRACE_S
from mosaic.store.recover import recover_spill
from mosaic.store.resume import StoredRun
from tests.disks import fill
from tests.store.test_writer import count, make_writer, new_run

pytestmark = pytest.mark.timeout(90)

#: Step rows whose observations do not compress: 2 KB each, so a few thousand fill the disk.
OBSERVATION_FLOATS = 256


def noisy_steps(run_id: int, episode: int, count: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(episode)
    return [(run_id, "env", episode, step, "agent", "agent_0", rng.random(OBSERVATION_FLOATS),
             step % 2, 1.0, False, step == count - 1) for step in range(count)]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def test_a_disk_that_fills_and_frees_again_loses_nothing(small_disk: Path, spill_folder: Path,
                                                         writers: list[StoreWriter]) -> None:
    """Records written while the disk is full wait (past the buffer in the spill file, which
    moves to the temporary folder), and all are written in order once there is room; the run
    never sees an error and the spill file is gone."""
    store = small_disk / "results.sqlite"
    writer = make_writer(writers, store, buffer_rows=200, flush_interval=0.05)
    run = new_run(writer)
    writer.record_steps(noisy_steps(run, 0, 50))
    assert writer.flush(10)
    filler = fill(small_disk)
    for episode in range(1, 9):
        writer.record_steps(noisy_steps(run, episode, 100))
        writer.record_transition(run, f"e{episode - 1}", f"e{episode}", None)
        if episode == 1:  # the rest comes during the outage
            wait_for(lambda: writer.stats.retries > 0, 10, "a write failed on the full disk")
    wait_for(lambda: writer.stats.rows_spilled > 0, 10, "records past the buffer spilled")
    filler.unlink()
    assert writer.flush(30)
    assert writer.lost is None
    assert count(store, "steps") == 850
    db = sqlite3.connect(store)
    try:
        order = [row[0] for row in db.execute("SELECT to_state FROM transitions ORDER BY seq")]
    finally:
        db.close()
    assert order == [f"e{episode}" for episode in range(1, 9)]
    assert writer.verify_run(run) is None
    writer.close()
    assert writer.stats.rows_dropped == 0
    assert list(spill_folder.iterdir()) == []
    assert sorted(p.name for p in small_disk.iterdir()) == ["results.sqlite",
                                                           "results.sqlite-shm",
                                                           "results.sqlite-wal"]


def test_a_disk_that_stays_full_loses_the_store_and_recover_writes_every_record_in(
        small_disk: Path, spill_folder: Path, writers: list[StoreWriter]) -> None:
    """A full disk is given up on after its grace, not the whole outage: the listeners hear
    of it, flush and close raise StoreLost naming the store and the spill file, the file is
    intact, and once there is room ``recover_spill`` writes every record in, the run's end too."""
    store = small_disk / "results.sqlite"
    writer = make_writer(writers, store, outage_s=600, flush_interval=0.05)
    heard: list[StoreLost] = []
    writer.on_lost(heard.append)
    run = new_run(writer)
    writer.record_steps(noisy_steps(run, 0, 50))
    assert writer.flush(10)
    filler = fill(small_disk)
    started = time.monotonic()
    for episode in range(1, 5):
        writer.record_steps(noisy_steps(run, episode, 100))
    wait_for(lambda: bool(heard), FULL_GRACE_S + 20, "the store given up on")
    assert time.monotonic() - started < FULL_GRACE_S + 20
    assert len(heard) == 1 and heard[0] is writer.lost
    with pytest.raises(StoreLost):
        writer.flush(5)
    with pytest.raises(StoreLost):
        writer.verify_run(run)
    writer.record_steps(noisy_steps(run, 5, 100))  # after the loss: to the spill file too
    writer.run_finished(run, "failed", "the store was lost", 6, 550)
    with pytest.raises(StoreLost) as lost:
        writer.close()
    error = lost.value
    assert error.spill is not None and Path(error.spill).parent == spill_folder
    assert str(store) in str(error) and "disk is full" in str(error)
    assert f"mosaic store recover {error.spill} --store {store}" in str(error)
    db = sqlite3.connect(store)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # A write may fit in the space the WAL file already had before the disk is found full.
        written = db.execute("SELECT count(*) FROM steps").fetchone()[0]
    finally:
        db.close()
    assert 50 <= written < 550
    assert error.unwritten == 550 - written + 1  # the run's end too

    filler.unlink()
    done = recover_spill(error.spill, store)
    assert (done.written, done.already, done.runs, done.cut_off) == (
        error.unwritten, 0, ("run-1",), 0)
    assert not Path(error.spill).exists()
    assert count(store, "steps") == 550
    db = sqlite3.connect(store)
    try:
        assert db.execute("SELECT status, steps FROM runs").fetchall() == [("failed", 550)]
        assert db.execute("SELECT count(*) FROM meta WHERE key LIKE 'spill:%'").fetchone() == (0,)
    finally:
        db.close()


def lose_the_store(writers: list[StoreWriter], store: Path) -> tuple[int, str]:
    """A run of a writer into ``store`` whose disk fills (and is freed once the store is
    lost): the run's id, and the spill file that holds its 100 steps."""
    writer = make_writer(writers, store, flush_interval=0.05)
    run = new_run(writer)
    filler = fill(store.parent)
    writer.record_steps(noisy_steps(run, 0, 100))
    wait_for(lambda: writer.lost is not None, FULL_GRACE_S + 20, "the store given up on")
    with pytest.raises(StoreLost) as lost:
        writer.close()
    filler.unlink()
    assert lost.value.spill is not None
    return run, lost.value.spill


def test_recover_refuses_a_store_the_runs_were_not_recorded_in(
        small_disk: Path, spill_folder: Path, tmp_path: Path, writers: list[StoreWriter]) -> None:
    store = small_disk / "results.sqlite"
    _, spill = lose_the_store(writers, store)

    other = tmp_path / "other.sqlite"
    with StoreWriter(other) as second:
        new_run(second, "another-run")
    with pytest.raises(StoreError, match="give --store the store those runs were recorded in"):
        recover_spill(spill, other)
    with pytest.raises(StoreError, match="not a mosaic spill file"):
        recover_spill(other, store)
    assert Path(spill).exists() and count(store, "steps") < 100


def test_verify_run_names_the_rows_the_store_does_not_hold(tmp_path: Path,
                                                           writers: list[StoreWriter]) -> None:
    """A row that cannot be encoded is dropped (and reported); the run's check says so."""
    store = tmp_path / "results.sqlite"
    writer = make_writer(writers, store)
    run = new_run(writer)
    rows = noisy_steps(run, 0, 3)
    rows[1] = (*rows[1][:6], lambda: None, *rows[1][7:])  # pickle refuses it
    writer.record_steps(rows)
    writer.record_episode(run, "env", 0, 3, 3.0, {"agent_0": 3.0}, False, True, None)
    with pytest.raises(StoreError, match="1 of 3 step rows cannot be stored"):
        writer.flush(10)
    problem = writer.verify_run(run)
    assert problem is not None and "holds 2 of 3 steps" in problem and str(store) in problem
    other = new_run(writer, "run-2")
    assert writer.verify_run(other) is None


def test_recover_leaves_out_the_records_of_a_run_resumed_since(
        small_disk: Path, spill_folder: Path, tmp_path: Path, writers: list[StoreWriter]) -> None:
    """A run continued with --resume after the store was lost has its own rows again: the
    spill file's are not its any more, and recover leaves them out instead of doubling it."""
    store = small_disk / "results.sqlite"
    run, spill = lose_the_store(writers, store)

    second = make_writer(writers, store)
    stored = second.find_experiment("exp")
    assert stored is None  # recorded without its text: it cannot be resumed, ...
    db = sqlite3.connect(store)
    try:
        [(status,)] = db.execute("SELECT status FROM runs").fetchall()
    finally:
        db.close()
    # ... but a run of a resumable one would be continued like this:
    second.run_restarted(StoredRun(run, "run-1", 0, status, 0, 0, None, None, None, None),
                         "resumed from episode 0")
    second.record_steps(noisy_steps(run, 0, 10))
    second.close()
    done = recover_spill(spill, store)
    assert done.superseded == ("run-1",) and done.written == 0
    assert count(store, "steps") == 10
