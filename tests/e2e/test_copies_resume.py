"""Continuing runs of environments with ``copies:`` and ``rollouts:`` through the real CLI.

A phase that continues a saved one numbers each copy's episodes on from where the saved run
stopped, with seeds it never took; ``--resume`` after the command and its session were
SIGKILLed in such a phase ends with the digests of an uninterrupted invocation. A continued run
of copies does not repeat the trajectories of one longer run (the copies' episodes under way
when the saved run stopped are not finished), so the digest is compared between invocations of
the same file, not with one run of both phases.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.cli import assert_store_consistent, query, run_mosaic, write_experiment
from tests.e2e.test_resume import count, digests, killed_when, uninterrupted_digests

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PHASED = """\
    uid: phased-rollouts
    seed: 5
    placement: process
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
        copies: 2
        rollouts: 2
    agents:
      - uid: learner
        brain: mosaic.agents.learners:PPOBrain
        muscle: mosaic.agents.learners:PPOMuscle
        params: {rollout_steps: 64, epochs: 2, minibatch_size: 32, hidden_sizes: [16]}
    phases:
      - {name: first, mode: train, episodes: 12}
      - {name: second, mode: train, episodes: 250}
"""
#: A run of copies in threads, and one that continues it in another invocation, saving a
#: checkpoint every 20 episodes (a resumed run must not load its own).
LOADED = """\
    uid: loaded-copies
    seed: 5
    episodes: {episodes}
    placement: thread
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
        copies: 3
    agents:
      - uid: learner
        brain: mosaic.agents.learners:PPOBrain
        muscle: mosaic.agents.learners:PPOMuscle
        params: {{rollout_steps: 64, epochs: 2, minibatch_size: 32, hidden_sizes: [16]}}
        {load}
"""
SEEDS = "SELECT seed FROM episodes WHERE run_id = ?"


def assert_numbered_on(store: Path, first: int, second: int) -> None:
    """Run ``second`` begins each copy right after the highest episode number run ``first``
    stored for it (its steps and episodes), and no seed comes back."""
    numbers = ("SELECT copy, max(episode), min(episode) FROM (SELECT copy, episode FROM steps "
               "WHERE run_id = ? UNION ALL SELECT copy, episode FROM episodes WHERE run_id = ?) "
               "GROUP BY copy ORDER BY copy")
    before = query(store, numbers, first, first)
    after = query(store, numbers, second, second)
    assert [copy for copy, _, _ in before] == [copy for copy, _, _ in after]
    assert len(before) >= 3
    for (copy, highest, _), (_, _, lowest) in zip(before, after, strict=True):
        assert lowest == highest + 1, f"copy {copy}"
    assert not set(query(store, SEEDS, first)) & set(query(store, SEEDS, second))
    assert query(store, "SELECT count(*) FROM (SELECT 1 FROM steps GROUP BY run_id, episode, "
                        "step, copy HAVING count(*) > 1)") == [(0,)]


def resume(path: Path, store: Path) -> None:
    resumed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume",
                         "-q", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr and "keeps no position" not in resumed.stderr
    assert_store_consistent(store)


def test_a_killed_invocation_that_loads_a_checkpoint_resumes_numbering_its_copies_on(
        tmp_path: Path, process_tag: str) -> None:
    first = write_experiment(tmp_path, LOADED.format(episodes=12, load=""), "first.yml")
    store = tmp_path / "results.sqlite"
    done = run_mosaic("experiment-start", str(first), "--store", str(store), "-q", timeout=120)
    assert done.returncode == 0, done.stderr
    # The same store twice over: one continues it to its end, the other is killed.
    whole = tmp_path / "whole.sqlite"
    shutil.copy2(store, whole)
    shutil.copytree(tmp_path / "results-checkpoints", tmp_path / "whole-checkpoints")
    second = write_experiment(tmp_path, LOADED.format(
        episodes=250, load="load: {phase: main}\n        checkpoint_every: 20"), "second.yml")
    done = run_mosaic("experiment-start", str(second), "--store", str(whole), "-q", timeout=120)
    assert done.returncode == 0, done.stderr
    assert_numbered_on(whole, 1, 2)

    # Killed once the second run saved a checkpoint of its own, newer than the first's.
    saved = tmp_path / "results-checkpoints" / "loaded-copies"
    killed_when(second, store, lambda: len(list(saved.glob("*/main/learner.npz"))) == 2 and count(
        store, "SELECT count(*) FROM steps WHERE run_id = 2") >= 200, "the second's checkpoint")
    resume(second, store)
    assert digests(store) == digests(whole)
    assert_numbered_on(store, 1, 2)


def test_a_killed_phase_of_rollout_workers_resumes_numbering_their_copies_on(
        tmp_path: Path, process_tag: str) -> None:
    expected = uninterrupted_digests(tmp_path, PHASED)
    assert [status for _, status, _, _ in expected] == ["finished", "finished"]
    assert_numbered_on(tmp_path / "whole.sqlite", 1, 2)

    path = write_experiment(tmp_path, PHASED)
    store = tmp_path / "results.sqlite"
    killed_when(path, store, lambda: count(
        store, "SELECT count(*) FROM steps WHERE run_id = 2") >= 200,
                "200 steps of the second phase")
    [(started_at,)] = query(store, "SELECT started_at FROM runs WHERE id = 1")
    resume(path, store)
    assert digests(store) == expected
    assert_numbered_on(store, 1, 2)
    # The first phase is not run again; the second starts over in its row, from the first
    # phase's position.
    assert query(store, "SELECT started_at FROM runs WHERE id = 1") == [(started_at,)]
    assert query(store, "SELECT run_id, reason FROM transitions WHERE to_state = 'resumed'") == [
        (2, "resumed (it was running) from episode 0")]
