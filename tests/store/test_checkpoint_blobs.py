"""Agents' checkpoint files in the store: the latest version of each name per run, checked
against its hash when read back."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from mosaic.core.errors import StoreError
from mosaic.store import StoreWriter
from tests.store.test_writer import make_writer, new_run


def test_the_latest_checkpoint_of_a_name_is_kept_and_read_back(
        tmp_path: Path, writers: list[StoreWriter]) -> None:
    store = tmp_path / "results.sqlite"
    writer = make_writer(writers, store)
    run = new_run(writer, "run-a")
    other = new_run(writer, "run-b")
    writer.record_checkpoint(run, "learner.npz", b"first", 25)
    writer.record_checkpoint(run, "learner.npz", b"second", 50)
    writer.record_checkpoint(run, "learner.previous.npz", b"first", 25)
    writer.record_checkpoint(other, "learner.npz", b"other", 0)
    assert writer.saved_checkpoint("run-a", "learner.npz") == b"second"
    assert writer.saved_checkpoint("run-a", "learner.previous.npz") == b"first"
    assert writer.saved_checkpoint("run-b", "learner.npz") == b"other"
    assert writer.saved_checkpoint("run-a", "brain.npz") is None
    assert writer.saved_checkpoint("no-such-run", "learner.npz") is None
    writer.close()
    with closing(sqlite3.connect(store)) as db:
        assert db.execute("SELECT name, episodes FROM checkpoints WHERE run_id = ? "
                          "ORDER BY name", (run,)).fetchall() == [
            ("learner.npz", 50), ("learner.previous.npz", 25)]


def test_a_damaged_checkpoint_is_refused_when_read(tmp_path: Path,
                                                   writers: list[StoreWriter]) -> None:
    store = tmp_path / "results.sqlite"
    writer = make_writer(writers, store)
    run = new_run(writer, "run-a")
    writer.record_checkpoint(run, "learner.npz", b"good bytes")
    assert writer.flush(10)
    with closing(sqlite3.connect(store)) as db:
        db.execute("UPDATE checkpoints SET data = ?", (b"bad bytes",))
        db.commit()
    with pytest.raises(StoreError, match="damaged"):
        writer.saved_checkpoint("run-a", "learner.npz")
