"""End to end: PettingZoo games through the real ``mosaic`` command, checked in the store."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.agents import RandomMuscle
from mosaic.core.errors import MosaicError
from mosaic.messages.codec import unpack
from tests.e2e.cli import REPO, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

TICTACTOE_EXAMPLE = REPO / "examples" / "tictactoe_random.yml"
RPS_EXAMPLE = REPO / "examples" / "rps_parallel.yml"
TICTACTOE_EPISODES = 50  # in the example

TICTACTOE = """\
    uid: {uid}
    seed: 5
    episodes: {episodes}
    placement: thread
    environments:
      - uid: tictactoe
        env: pettingzoo:classic.tictactoe_v3
        policy_mapping: {{player_1: {first}, player_2: {second}}}
    agents:
"""
AGENT = """\
      - uid: {uid}
        muscle: {muscle}
"""


def tictactoe(uid: str, first: str, second: str, episodes: int = 20,
              muscle: str = "mosaic.agents:RandomMuscle") -> str:
    text = TICTACTOE.format(uid=uid, episodes=episodes, first=first, second=second)
    for agent in dict.fromkeys((first, second)):
        text += AGENT.format(uid=agent, muscle=muscle)
    return text


def start(path: Path, store: Path) -> None:
    """Run ``mosaic experiment-start`` and check that it exited 0 and its one run finished."""
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert (status, error) == ("finished", None)


def steps(store: Path) -> list[tuple[Any, ...]]:
    """(episode, step, agent, slot, observation, action, reward, terminated, truncated), decoded."""
    rows = query(store, "SELECT episode, step, agent, slot, observation, action, reward, "
                        "terminated, truncated FROM steps ORDER BY id")
    return [(e, s, agent, slot, unpack(o), unpack(a), r, bool(t), bool(u))
            for e, s, agent, slot, o, a, r, t, u in rows]


def episodes(store: Path) -> list[tuple[int, int, dict[str, float], bool, bool]]:
    rows = query(store, "SELECT episode, steps, returns, terminated, truncated FROM episodes "
                        "ORDER BY episode")
    return [(e, n, json.loads(r), bool(t), bool(u)) for e, n, r, t, u in rows]


def check_tictactoe(store: Path, seats: dict[str, str], episode_count: int) -> None:
    """Every move was legal, on the board it was made on; turns alternate; games are zero-sum."""
    rows = steps(store)
    assert {(slot, agent) for _, _, agent, slot, *_ in rows} == set(seats.items())
    by_episode: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_episode[row[0]].append(row)
    assert sorted(by_episode) == list(range(episode_count))
    for moves in by_episode.values():
        assert [m[1] for m in moves] == list(range(len(moves)))
        assert [m[3] for m in moves] == [("player_1", "player_2")[i % 2] for i in range(len(moves))]
        played: set[int] = set()
        for _, _, _, slot, observation, action, _, _, truncated in moves:
            mask = observation["action_mask"]
            board = observation["observation"]
            # The stored observation is the board the move was made on ...
            occupied = {int(i) for i in np.flatnonzero(board.sum(axis=-1).flatten())}
            assert occupied == played
            # ... and the move was legal on it.
            assert mask[action] == 1, f"illegal move {action} by {slot} with mask {mask}"
            assert set(np.flatnonzero(mask).tolist()) == set(range(9)) - played
            played.add(int(action))
            assert not truncated
        # Each player's last move is settled when the game ends: both are terminal rows.
        assert all(m[7] for m in moves[-2:]) and not any(m[7] for m in moves[:-2])
    for _, count, returns, terminated, truncated in episodes(store):
        # An illegal move would end a game with -1 for the mover alone.
        assert sum(returns.values()) == 0 and set(returns) == set(seats)
        assert 5 <= count <= 9 and terminated and not truncated


def test_the_tictactoe_example_in_threads_and_in_processes(tmp_path: Path,
                                                           process_tag: str) -> None:
    text = TICTACTOE_EXAMPLE.read_text()
    assert "\nplacement: thread " in text
    recorded = {}
    for placement in ("thread", "process"):
        path = write_experiment(tmp_path, text.replace("\nplacement: thread ",
                                                       f"\nplacement: {placement} "),
                                f"{placement}.yml")
        store = tmp_path / f"{placement}.sqlite"
        start(path, store)
        check_tictactoe(store, {"player_1": "alice", "player_2": "bob"}, TICTACTOE_EPISODES)
        recorded[placement] = query(store, "SELECT episode, step, agent, slot, observation, "
                                           "action, reward FROM steps ORDER BY id")
    assert recorded["thread"] == recorded["process"]


def test_one_agent_plays_both_seats(tmp_path: Path, process_tag: str) -> None:
    path = write_experiment(tmp_path, tictactoe("solo-tictactoe", "solo", "solo"))
    store = tmp_path / "results.sqlite"
    start(path, store)
    check_tictactoe(store, {"player_1": "solo", "player_2": "solo"}, 20)


def test_the_rps_parallel_example(tmp_path: Path, process_tag: str) -> None:
    store = tmp_path / "results.sqlite"
    start(RPS_EXAMPLE, store)
    rows = steps(store)
    seats = {"player_0": "rock_fan", "player_1": "paper_fan"}
    assert {(slot, agent) for _, _, agent, slot, *_ in rows} == set(seats.items())
    by_step: dict[tuple[int, int], dict[str, tuple[Any, ...]]] = defaultdict(dict)
    for row in rows:
        by_step[row[0], row[1]][row[3]] = row
    assert sorted(by_step) == [(e, s) for e in range(10) for s in range(15)]
    for (episode, step), both in by_step.items():
        assert set(both) == set(seats)  # both players acted in every step
        assert sum(row[6] for row in both.values()) == 0
        assert all(row[5] in (0, 1, 2) for row in both.values())
        assert all(row[8] == (step == 14) for row in both.values())
        # Each player observes the opponent's previous move (3: none yet).
        for slot, opponent in (("player_0", "player_1"), ("player_1", "player_0")):
            seen = both[slot][4]
            expected = 3 if step == 0 else by_step[episode, step - 1][opponent][5]
            assert seen == expected
    for _, count, returns, terminated, truncated in episodes(store):
        assert (count, terminated, truncated) == (15, False, True)
        assert sum(returns.values()) == 0


# -- what the simulation controller does not yet do for turn-based games -----------------------

class TurnTakingMuscle(RandomMuscle):
    """A random player that fails the run when ``feedback`` for a slot does not answer an
    ``act`` of that slot, as :class:`~mosaic.agents.Muscle` documents: "for each step act for
    every slot that must act, then feedback with the outcome of that action".
    """

    def reset(self) -> None:
        super().reset()
        self._waiting: set[str] = set()

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        self._waiting.add(slot)
        return super().act(slot, observation, legal_actions)

    def feedback(self, slot: str, reward: float, terminated: bool, truncated: bool,
                 observation: Any) -> None:
        if slot not in self._waiting:
            raise MosaicError(f"feedback for {slot!r} (reward {reward}, observation "
                              f"{'None' if observation is None else 'given'}), which has not "
                              "acted since its last feedback")
        self._waiting.discard(slot)


def test_feedback_answers_each_move_of_a_turn_based_game(tmp_path: Path, process_tag: str) -> None:
    path = write_experiment(tmp_path, tictactoe(
        "turns", "alice", "bob", episodes=5,
        muscle="tests.e2e.test_pettingzoo:TurnTakingMuscle"))
    start(path, tmp_path / "results.sqlite")


def test_feedback_answers_each_move_of_a_simultaneous_game(tmp_path: Path,
                                                           process_tag: str) -> None:
    """TurnTakingMuscle's check holds where every slot acts in every step."""
    text = RPS_EXAMPLE.read_text().replace("mosaic.agents:RandomMuscle",
                                           "tests.e2e.test_pettingzoo:TurnTakingMuscle")
    assert "TurnTakingMuscle" in text
    path = write_experiment(tmp_path, text)
    start(path, tmp_path / "results.sqlite")


def test_the_step_rows_of_a_slot_add_up_to_its_return(tmp_path: Path, process_tag: str) -> None:
    path = write_experiment(tmp_path, tictactoe("rewards", "alice", "bob"))
    store = tmp_path / "results.sqlite"
    start(path, store)
    recorded: dict[tuple[int, str], float] = defaultdict(float)
    for episode, _, _, slot, _, _, reward, _, _ in steps(store):
        recorded[episode, slot] += reward
    for episode, _, returns, _, _ in episodes(store):
        for slot, total in returns.items():
            assert recorded[episode, slot] == total, (episode, slot)
