"""Replay re-simulates a stored episode, and its digests catch a stored step that was changed."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from mosaic.dashboard.replay import ReplayError, replay_episode, replayable, run_check
from mosaic.messages.codec import pack, unpack
from mosaic.store import open_store


def test_a_stored_episode_replays_to_the_same_digest(cartpole_store: Path) -> None:
    with open_store(cartpole_store) as store:
        assert replayable(store, 1) == ["cartpole"]
        replay = replay_episode(store, 1, "cartpole", 2)
        assert replay.same and replay.mismatch_at is None
        assert len(replay.frames) == len(replay.actions) + 1
        assert run_check(store, 1) == (store.show_run(1).digest, "verified")


def test_a_changed_action_is_caught_by_both_digests(cartpole_store: Path,
                                                    tmp_path: Path) -> None:
    copy = tmp_path / "changed.sqlite"
    shutil.copy(cartpole_store, copy)
    with sqlite3.connect(copy) as db:
        row_id, action = db.execute(
            "SELECT id, action FROM steps WHERE run_id = 1 AND episode = 1 AND step = 3"
        ).fetchone()
        db.execute("UPDATE steps SET action = ? WHERE id = ?",
                   (pack(1 - int(unpack(action))), row_id))
    with open_store(copy) as store:
        replay = replay_episode(store, 1, "cartpole", 1)
        assert not replay.same and replay.mismatch_at is not None
        assert run_check(store, 1)[1].startswith("mismatch")


def test_an_unknown_environment_is_refused_with_a_reason(cartpole_store: Path) -> None:
    with open_store(cartpole_store) as store, pytest.raises(ReplayError, match="no environment"):
        replay_episode(store, 1, "nowhere", 0)
