"""Each operator's randomness comes from its own seed stream, not from the environment's seed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mosaic.core.seeding import operator_episode_seed, operator_seed
from mosaic.operators.evaluation.script import operator_config_for, run_script
from tests.operators.test_script_mode import evaluation, records, reproducible_part

from . import worker

pytestmark = pytest.mark.timeout(60)

TWO_RANDOM = [{"id": "a", "type": "random", "env": "CartPole-v1"},
              {"id": "b", "type": "random", "env": "CartPole-v1"}]


def actions(path: Path) -> dict[tuple[str, int], list[Any]]:
    """Each (operator, episode)'s actions, in order."""
    played: dict[tuple[str, int], list[Any]] = {}
    for record in records(path):
        if record["kind"] == "step":
            played.setdefault((record["operator"], record["episode"]), []).append(
                record["action"])
    return played


def test_two_random_operators_on_one_seed_play_differently_and_reproducibly(
    tmp_path: Path,
) -> None:
    _, config = evaluation(tmp_path, operators=TWO_RANDOM, max_steps=20)
    assert run_script(config, telemetry_path=tmp_path / "first.jsonl").ok
    assert run_script(config, telemetry_path=tmp_path / "second.jsonl").ok

    # The same file gives the same telemetry, step for step.
    assert reproducible_part(tmp_path / "first.jsonl") == reproducible_part(
        tmp_path / "second.jsonl")
    played = actions(tmp_path / "first.jsonl")
    seeds = {r["episode"]: r["seed"] for r in records(tmp_path / "first.jsonl")
             if r["kind"] == "episode"}
    assert len(seeds) == 3  # both played every episode on the same environment seed
    for episode in range(3):
        first = played[("a", episode)]
        assert first != played[("b", episode)][:len(first)]


def test_fixed_mode_varies_the_actions_from_episode_to_episode(tmp_path: Path) -> None:
    _, config = evaluation(tmp_path, operators=TWO_RANDOM[:1], seeds=[3], episodes=3,
                           environment_mode="fixed", max_steps=20)
    assert run_script(config, telemetry_path=tmp_path / "t.jsonl").ok
    played = actions(tmp_path / "t.jsonl")
    assert {r["seed"] for r in records(tmp_path / "t.jsonl") if r["kind"] == "step"} == {3}
    episodes = [tuple(played[("a", k)]) for k in range(3)]
    assert len(set(episodes)) == 3  # one environment seed, three different action streams


def test_the_evaluation_seed_and_the_position_choose_the_operator_seed(tmp_path: Path) -> None:
    _, config = evaluation(tmp_path, operators=TWO_RANDOM, seed=11)
    first, second = (operator_config_for(spec, config).settings["seed"]
                     for spec in config.operators)
    assert (first, second) == (operator_seed(11, 0), operator_seed(11, 1))
    _, other = evaluation(tmp_path, operators=TWO_RANDOM, seed=12)
    assert operator_config_for(other.operators[0], other).settings["seed"] != first
    _, unseeded = evaluation(tmp_path, operators=TWO_RANDOM)  # derived from the seeds list
    assert unseeded.run_seed == evaluation(tmp_path, operators=TWO_RANDOM)[1].run_seed
    assert operator_config_for(unseeded.operators[0], unseeded).settings["seed"] != first
    assert operator_episode_seed(first, 0) != operator_episode_seed(first, 1)


def test_selector_mode_honours_the_seed_option(start: Callable) -> None:
    """A MOSAIC-style driver starts the worker with --seed and only sends init_agent and
    select_action: the actions follow the seed."""

    def played(seed: str) -> list[int]:
        handle = start(worker("random_worker", "--seed", seed))
        handle.init_agent("player_0", settings={"n_actions": 6})
        moves = [handle.select_action(0)["action"] for _ in range(20)]
        handle.stop()
        return moves

    seven = played("7")
    assert played("7") == seven and played("8") != seven
    assert len(set(seven)) > 1


def test_a_reset_seed_alone_still_seeds_a_worker_without_an_operator_seed(
    start: Callable,
) -> None:
    """Without --seed, the reset seed seeds the actions (what a driver that gives no operator
    seed, like the conformance checker, relies on)."""

    def played(argv: list[str], seed: int) -> list[int]:
        handle = start(argv)
        handle.reset(seed)
        moves = []
        while True:
            step, end = handle.step()
            moves.append(step["action"])
            if end is not None:
                handle.stop()
                return moves

    plain = worker("random_worker", "--env-id", "CartPole-v1")
    assert played(plain, 5) == played(plain, 5)
    seeded = worker("random_worker", "--env-id", "CartPole-v1", "--seed", "9")
    # With an operator seed, another environment seed leaves the action stream unchanged.
    first, other = played(seeded, 5), played(seeded, 6)
    shortest = min(len(first), len(other))
    assert first[:shortest] == other[:shortest]
