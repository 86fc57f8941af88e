"""End to end: the environment's ``info`` reaches muscles and, with ``store_info``, the store
(one environment and ``copies:``, threads and processes); ``wrappers:`` wrap environments in
order; derived seeds fit environments that take signed 32-bit seeds only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mosaic.store import open_store
from tests.e2e.cli import assert_store_consistent, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# FrozenLake is slippery by default: its info says how likely the move taken was, 1/3 after
# each step and 1 after a reset.
LAKE = """\
    uid: lake-info
    seed: 5
    episodes: {episodes}
    placement: {placement}
    environments:
      - uid: lake
        env: gymnasium:FrozenLake-v1
        store_info: [prob, is_success]
{extra}
    agents:
      - uid: walker
        muscle: tests.fixtures.info_muscles:{muscle}
"""


def _run(folder: Path, name: str, text: str) -> Path:
    path = write_experiment(folder, text, f"{name}.yml")
    store = folder / f"{name}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=100)
    assert result.returncode == 0, result.stderr
    assert query(store, "SELECT status FROM runs") == [("finished",)]
    assert_store_consistent(store)
    return store


def _metrics(store: Path, name: str) -> list[float]:
    return [value for (value,) in query(store, "SELECT value FROM metrics WHERE name = ? "
                                               "ORDER BY id", name)]


def test_a_muscle_gets_each_info_and_store_info_keeps_the_chosen_keys(tmp_path, process_tag):
    digests = {}
    for placement in ("thread", "process"):
        store = _run(tmp_path, placement, LAKE.format(episodes=4, placement=placement, extra="",
                                                     muscle="InfoMetricMuscle"))
        [(steps, episodes, digest)] = query(store, "SELECT steps, episodes, digest FROM runs")
        digests[placement] = digest
        # One info per reset and per step, each with its prob: 1 after a reset, 1/3 after a step.
        probs = _metrics(store, "prob")
        assert len(_metrics(store, "infos")) == len(probs) == steps + episodes
        assert sorted(set(np.round(probs, 6))) == [round(1 / 3, 6), 1.0]
        assert probs.count(1.0) == episodes
        with open_store(store) as results:
            rows = list(results.steps(results.list_runs()[0].uid))
        # The chosen keys the info has (FrozenLake gives no is_success), every step.
        assert len(rows) == steps
        assert all(row.info == {"prob": pytest.approx(1 / 3)} for row in rows)
    assert digests["thread"] == digests["process"]


@pytest.mark.parametrize("muscle", ["BatchInfoMetricMuscle", "SingleInfoMetricMuscle"])
def test_copies_give_each_copy_its_info_and_store_it(tmp_path, process_tag, muscle):
    store = _run(tmp_path, "copies", LAKE.format(episodes=9, placement="process",
                                                 extra="        copies: 3", muscle=muscle))
    [(steps,)] = query(store, "SELECT steps FROM runs")
    probs = _metrics(store, "prob")
    if muscle == "BatchInfoMetricMuscle":
        # The outcome of every action, the last of an episode included: never a reset's info.
        assert len(probs) == steps and set(np.round(probs, 6)) == {round(1 / 3, 6)}
    else:
        # One instance per copy: the info of its resets and of its steps.
        assert len(probs) > steps and set(np.round(probs, 6)) == {round(1 / 3, 6), 1.0}
    with open_store(store) as results:
        rows = list(results.steps(results.list_runs()[0].uid))
    assert len(rows) == steps and all(row.info["prob"] == pytest.approx(1 / 3) for row in rows)
    copies = {copy for (copy,) in query(store, "SELECT DISTINCT copy FROM steps")}
    assert copies == {0, 1, 2}


CARTPOLE = """\
    uid: wrapped
    seed: 2
    episodes: 6
    environments:
      - uid: pole
        env: gymnasium:CartPole-v1
{wrappers}
    agents:
      - uid: random
        muscle: mosaic.agents:RandomMuscle
"""


@pytest.mark.parametrize("copies", ["", "        copies: 2\n        vector_mode: async"])
def test_wrappers_apply_in_order_with_their_parameters(tmp_path, process_tag, copies):
    plain = _run(tmp_path, "plain", CARTPOLE.format(wrappers=copies))
    wrapped = _run(tmp_path, "wrapped", CARTPOLE.format(wrappers=copies + """
        wrappers:
          - TimeLimit: {max_episode_steps: 7}
          - gymnasium.wrappers.ClipReward: {min_reward: 0, max_reward: 0.5}
          - NormalizeObservation"""))
    lengths = [n for (n,) in query(plain, "SELECT steps FROM episodes")]
    assert max(lengths) > 7  # a random CartPole episode lasts about 20 steps
    rows = query(wrapped, "SELECT steps, truncated, total_return FROM episodes")
    assert len(rows) == 6
    # TimeLimit cut the long episodes at 7 steps; ClipReward (after it) halved every reward.
    assert max(steps for steps, _, _ in rows) == 7
    assert all(truncated for steps, truncated, _ in rows if steps == 7)
    assert all(total == pytest.approx(steps * 0.5) for steps, _, total in rows)


def test_every_derived_seed_fits_an_environment_that_takes_32_bit_seeds(tmp_path, process_tag):
    # About half of the seeds mosaic derived before 31 bits would have failed this environment.
    text = """\
    uid: int32
    seed: 9
    episodes: 24
    environments:
      - uid: small
        env: tests.fixtures.envs:Int32SeedCartPole
      - uid: smalls
        env: tests.fixtures.envs:Int32SeedCartPole
        copies: 3
    agents:
      - uid: random
        muscle: mosaic.agents:RandomMuscle
"""
    store = _run(tmp_path, "int32", text)
    seeds = [seed for (seed,) in query(store, "SELECT seed FROM episodes")]
    assert len(seeds) == 48 and all(0 <= seed < 2**31 for seed in seeds)
