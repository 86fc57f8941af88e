"""End to end: ``copies:`` steps N copies of an environment in one actor, one message per
batch both ways, with the same digest in every placement and vector mode, each copy's episodes
recorded with its copy index and seed."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from mosaic.core.seeding import episode_seed
from tests.e2e.cli import (
    REPO,
    finish,
    mosaic_command,
    query,
    run_mosaic,
    wait_for_steps,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

COPIES = """\
    uid: copies
    seed: 5
    episodes: {episodes}
    placement: {placement}
    {max_steps}
    environments:
      - uid: cartpole
        env: {env}
        {copies}
        {vector_mode}
        record_steps: all
    agents:
      - uid: player
        muscle: {muscle}
"""

#: Met by the third episode to end (CartPole returns at least 8).
THRESHOLD = """\
    termination:
      reward_threshold: 1
      window: 3
"""


def _run(tmp_path, name: str, *, placement: str = "thread", episodes: int = 12,
         env: str = "gymnasium:CartPole-v1", copies: int | None = 4, vector_mode: str = "",
         muscle: str = "mosaic.agents:RandomMuscle", max_steps: int | None = None,
         termination: str = "", ended: int | None = None, seeding: str = ""):
    """Run the experiment to its end: ``ended`` episodes (default: ``episodes``)."""
    text = COPIES.format(
        episodes=episodes, placement=placement, env=env, muscle=muscle,
        copies=f"copies: {copies}" if copies else "",
        vector_mode=(f"vector_mode: {vector_mode}" if vector_mode else "")
        + (f"\n        seeding: {seeding}" if seeding else ""),
        max_steps=f"max_steps: {max_steps}" if max_steps else "") + termination
    store = tmp_path / f"{name}.sqlite"
    path = write_experiment(tmp_path, text, f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=120)
    assert result.returncode == 0, result.stderr
    [(status, episodes_done, steps, digest)] = query(
        store, "SELECT status, episodes, steps, digest FROM runs")
    assert status == "finished" and episodes_done == (episodes if ended is None else ended)
    return store, steps, digest


@pytest.mark.parametrize("vector_mode", ["sync", "async"])
def test_the_digest_is_the_same_in_threads_and_processes(tmp_path, process_tag, vector_mode):
    seen = {}
    for placement in ("thread", "process"):
        store, steps, digest = _run(tmp_path, f"{placement}-{vector_mode}", placement=placement,
                                    vector_mode=vector_mode)
        episodes = query(store, "SELECT copy, episode, steps, seed FROM episodes")
        seen[placement] = (steps, digest, sorted(episodes))
    assert seen["thread"] == seen["process"]
    # sync and async hold the same copies: the same trajectories.
    assert _run(tmp_path, "sync-baseline")[1:] == seen["thread"][:2]


def test_each_copy_has_its_own_episodes_seeds_and_steps(tmp_path, process_tag):
    store, steps, _ = _run(tmp_path, "copies", copies=4, episodes=16)
    episodes = query(store, "SELECT copy, episode, steps, total_return, seed FROM episodes")
    assert len(episodes) == 16
    assert {copy for copy, *_ in episodes} == {0, 1, 2, 3}
    for copy in range(4):
        numbers = sorted(e for c, e, *_ in episodes if c == copy)
        assert numbers == list(range(len(numbers)))  # each copy counts its own episodes
    # A seed of its own for each episode: the one derived from the run's seed, the
    # environment's index, the episode's number and the copy.
    [(run_seed,)] = query(store, "SELECT seed FROM runs")
    assert all(seed == episode_seed(run_seed, 0, episode, copy)
               for copy, episode, *_, seed in episodes)
    # Every recorded step belongs to a copy's episode; ended episodes are complete.
    for copy, episode, length, total, _ in episodes:
        rows = query(store, "SELECT step, reward, terminated, truncated FROM steps "
                            "WHERE copy = ? AND episode = ? ORDER BY step", copy, episode)
        assert [r[0] for r in rows] == list(range(length))
        assert sum(r[1] for r in rows) == pytest.approx(total)
        assert rows[-1][2] or rows[-1][3]
    assert steps >= sum(e[2] for e in episodes)


def test_a_termination_condition_ends_the_copies_where_it_is_met(tmp_path, process_tag):
    """The third episode to end meets the threshold; those other copies end in the same step
    are not counted."""
    seen = {}
    for placement in ("thread", "process"):
        store, steps, digest = _run(tmp_path, placement, placement=placement, episodes=1000,
                                    termination=THRESHOLD, ended=3)
        recorded = query(store, "SELECT copy, episode, steps FROM episodes ORDER BY copy")
        assert len(recorded) == 3
        # No step past the one that met the threshold is recorded.
        assert query(store, "SELECT COUNT(*) FROM steps")[0][0] == steps
        seen[placement] = (steps, digest, recorded)
    assert seen["thread"] == seen["process"]


def test_the_number_of_copies_is_part_of_the_trajectories(tmp_path, process_tag):
    _, _, four = _run(tmp_path, "four", copies=4)
    _, _, two = _run(tmp_path, "two", copies=2)
    assert four != two


def test_a_muscle_without_batch_methods_gets_an_instance_per_copy(tmp_path, process_tag):
    for placement in ("thread", "process"):
        _run(tmp_path, placement, placement=placement, copies=3, episodes=9,
             muscle="tests.fixtures.vector_envs:EpisodeCheckingMuscle")


def test_max_steps_truncates_each_copy(tmp_path, process_tag):
    store, _, _ = _run(tmp_path, "short", copies=3, episodes=9, max_steps=5)
    lengths = query(store, "SELECT steps, truncated FROM episodes")
    assert max(length for length, _ in lengths) <= 5
    assert any(truncated for length, truncated in lengths if length == 5)


def test_copies_seeded_once_give_one_digest_in_threads_and_processes(tmp_path, process_tag):
    seen = {}
    for placement in ("thread", "process"):
        store, steps, digest = _run(tmp_path, f"once-{placement}", placement=placement,
                                    seeding="once")
        episodes = query(store, "SELECT copy, episode, steps, seed FROM episodes")
        # Seeded at the first reset only: no episode claims a seed of its own.
        assert all(seed is None for *_, seed in episodes)
        seen[placement] = (steps, digest, sorted(episodes))
    assert seen["thread"] == seen["process"]
    # Each copy's first episode is the one a seed per episode gives; later ones differ.
    _, _, per_episode = _run(tmp_path, "per-episode")
    assert seen["thread"][1] != per_episode


def test_a_native_vector_environment_resets_its_own_copies(tmp_path, process_tag):
    store, _, digest = _run(tmp_path, "native", copies=3, vector_mode="native", episodes=9)
    episodes = query(store, "SELECT copy, episode, steps, seed FROM episodes")
    assert {copy for copy, *_ in episodes} == {0, 1, 2}
    # One seed for the vector's first reset, none per episode: the store claims none.
    assert all(seed is None for *_, seed in episodes)
    assert _run(tmp_path, "native-again", copies=3, vector_mode="native", episodes=9)[2] == digest


def test_a_factory_that_makes_a_vector_environment_is_held_as_it_is(tmp_path, process_tag):
    store, _, _ = _run(tmp_path, "made", env="tests.fixtures.vector_envs:cartpole_vector",
                       copies=None, episodes=6)
    assert {copy for (copy,) in query(store, "SELECT copy FROM episodes")} == {0, 1, 2}


@pytest.mark.parametrize(("entry", "message"), [
    ("env: pettingzoo:classic.tictactoe_v3\n        copies: 2",
     "environments[0].copies: copies: takes Gymnasium environments"),
    ("env: gymnasium:CartPole-v1\n        copies: 0",
     "environments[0].copies"),
    ("env: gymnasium:CartPole-v1\n        vector_mode: async",
     "environments[0].vector_mode: vector_mode applies to copies"),
    ("env: gymnasium:CartPole-v1\n        copies: 2\n        vector_mode: threads",
     "environments[0].vector_mode"),
    ("env: gymnasium:CartPole-v1\n        seeding: once",
     "environments[0].seeding: seeding applies to copies"),
    ("env: gymnasium:CartPole-v1\n        copies: 2\n        seeding: always",
     "environments[0].seeding"),
    ("env: gymnasium:CartPole-v1\n        copies: 2\n        vector_mode: native\n"
     "        seeding: once", "environments[0].seeding: vector_mode: native seeds its copies"),
])
def test_a_bad_copies_entry_is_exit_2_naming_the_key(tmp_path, process_tag, entry, message):
    text = f"""\
    uid: bad
    environments:
      - uid: e
        {entry}
    agents:
      - uid: a
        muscle: mosaic.agents:RandomMuscle
"""
    path = write_experiment(tmp_path, text)
    result = run_mosaic("experiment-check", str(path), timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert str(path) in result.stderr


def test_ctrl_c_to_the_terminal_group_cancels_async_copies_cleanly(tmp_path, process_tag):
    """Ctrl-C reaches every process of the group, the copies' own processes too: the run still
    ends cancelled, in order, with exit 130 and no traceback, and leaves nothing behind."""
    text = COPIES.format(episodes=1_000_000, placement="thread", env="gymnasium:CartPole-v1",
                         muscle="mosaic.agents:RandomMuscle", copies="copies: 3",
                         vector_mode="vector_mode: async", max_steps="")
    store = tmp_path / "interrupted.sqlite"
    path = write_experiment(tmp_path, text)
    proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(path), "--store",
                             str(store)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for_steps(store, proc, minimum=30, timeout=60)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        stderr = finish(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    [(status,)] = query(store, "SELECT status FROM runs")
    assert status == "cancelled"
