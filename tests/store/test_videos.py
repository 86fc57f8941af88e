"""The ``videos`` table: what the writer enqueues is what readers list, a video recorded again
replaces the row before, and a store made before the table lists none."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mosaic.store import StoreWriter, open_store, schema

pytestmark = pytest.mark.timeout(30)


def test_videos_are_listed_by_run_environment_and_episode(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "s.sqlite")
    writer.start()
    try:
        experiment = writer.experiment_started("exp", "exp.yml", {"seed": 1})
        run = writer.run_started(experiment, "run-1", 0, 1)
        other = writer.run_started(experiment, "run-2", 1, 2)
        writer.record_video(run, "cartpole", 4, "/v/run-1", "cartpole-episode-4.mp4", 10)
        writer.record_video(run, "cartpole", 0, "/v/run-1", "cartpole-episode-0.mp4", 20)
        writer.record_video(other, "cartpole", 0, "/v/run-2", "cartpole-episode-0.mp4", 30)
        # A continued run records its videos again: the later row is the one kept.
        writer.record_video(run, "cartpole", 4, "/v/run-1", "cartpole-episode-4.mp4", 40)
        assert writer.flush(10)
    finally:
        writer.close()
    with open_store(tmp_path / "s.sqlite") as store:
        videos = store.videos("run-1")
        assert [(v.episode, v.size, str(v.path)) for v in videos] == [
            (0, 20, "/v/run-1/cartpole-episode-0.mp4"), (4, 40, "/v/run-1/cartpole-episode-4.mp4")]
        assert [v.run_id for v in store.videos("run-1", "run-2")] == [run, run, other]


def test_a_store_made_before_the_table_lists_no_videos(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "old.sqlite")
    writer.start()
    try:
        writer.run_started(writer.experiment_started("exp", "exp.yml", {}), "run-1", 0, 1)
    finally:
        writer.close()
    with sqlite3.connect(tmp_path / "old.sqlite") as db:
        db.execute(f"DROP TABLE {schema.videos.name}")
    with open_store(tmp_path / "old.sqlite") as store:
        assert store.videos("run-1") == []
