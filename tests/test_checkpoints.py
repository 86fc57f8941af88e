"""The checkpoint file: its parts round-trip, generators resume exactly, and a file of the
older layout (the brain's state alone) still loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mosaic.core.checkpoints import (
    Checkpoint,
    CheckpointError,
    learner_arrays,
    read_checkpoint,
    restore_learner,
    restore_rng,
    rng_state,
    save_state,
    write_checkpoint,
)


def test_the_parts_round_trip_through_the_file(tmp_path: Path) -> None:
    brain_rng, muscle_rng = np.random.default_rng(1), np.random.default_rng(2)
    brain_rng.random(5)
    written = Checkpoint(
        {"format": np.array("q_table"), "q": np.eye(2)},
        learner_arrays({"q": np.eye(2), "updates": np.array(3)}, brain_rng),
        {"a.b@env-1": learner_arrays({"episodes": np.array(4)}, muscle_rng)},
        "ab" * 16, {"env-1": (4, 1, 5)})
    path = tmp_path / "agent.npz"
    write_checkpoint(path, written)
    read = read_checkpoint(path)
    assert sorted(read.policy) == ["format", "q"] and read.digest == "ab" * 16
    assert read.positions == {"env-1": (4, 1, 5)} and list(read.muscles) == ["a.b@env-1"]

    fresh = np.random.default_rng(99)
    state = restore_learner(read.brain, fresh)
    assert sorted(state) == ["q", "updates"] and int(state["updates"]) == 3
    assert fresh.random() == brain_rng.random()  # the generator goes on where it stopped
    assert int(restore_learner(read.muscles["a.b@env-1"], fresh)["episodes"]) == 4


def test_a_file_of_the_older_layout_is_the_brain_state(tmp_path: Path) -> None:
    save_state(tmp_path / "old.npz", {"q": np.ones((2, 2))})
    read = read_checkpoint(tmp_path / "old.npz")
    assert read.muscles == {} and read.digest == "" and read.positions == {}
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    assert sorted(restore_learner(read.brain, rng)) == ["q"]
    assert rng.bit_generator.state == before  # nothing saved, nothing changed


def test_a_generator_of_another_kind_is_refused_by_name() -> None:
    saved = rng_state(np.random.Generator(np.random.MT19937(1)))
    with pytest.raises(CheckpointError, match="random generator"):
        restore_rng(np.random.default_rng(), saved)
    with pytest.raises(CheckpointError, match="random generator"):
        restore_rng(np.random.default_rng(), np.array("not json"))
