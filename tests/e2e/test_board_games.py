"""End to end through the CLI, on PettingZoo's classic games as they are: the built-in learners
play only legal moves, PPO clearly beats a random Connect Four player (the example, shortened),
and self-play records the snapshot that played each episode, alike in threads and processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, query, run_mosaic, write_experiment
from tests.e2e.test_pettingzoo import check_tictactoe, start

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PPO_EXAMPLE = REPO / "examples" / "connect_four_ppo.yml"
SELFPLAY_EXAMPLE = REPO / "examples" / "connect_four_selfplay.yml"

LEARNERS = """\
uid: learners
seed: 3
episodes: 30
placement: {placement}
environments:
  - uid: tictactoe
    env: pettingzoo:classic.tictactoe_v3
    policy_mapping: {{player_1: first, player_2: second}}
agents:
  - uid: first
    brain: mosaic.agents.learners:{first}Brain
    muscle: mosaic.agents.learners:{first}Muscle
    params: {{hidden_sizes: [16]}}
  - uid: second
    brain: mosaic.agents.learners:{second}Brain
    muscle: mosaic.agents.learners:{second}Muscle
    params: {{hidden_sizes: [16]}}
"""
DQN_PARAMS = "{hidden_sizes: [16], learning_starts: 20, batch_size: 8, epsilon_decay_steps: 50}"


def edited(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


def win_rate(store: Path, phase: str, seat: str = "player_0") -> float:
    (run_id,) = query(store, "SELECT id FROM runs WHERE uid LIKE ?", f"%-{phase}")[0]
    returns = [json.loads(text)[seat] for (text,) in
               query(store, "SELECT returns FROM episodes WHERE run_id = ?", run_id)]
    return sum(value > 0 for value in returns) / len(returns)


@pytest.mark.parametrize(("first", "second"), [("DQN", "PPO"), ("PolicyGradient", "DQN")])
def test_the_learners_play_tictactoe_as_it_is_with_legal_moves_only(
        tmp_path: Path, process_tag: str, first: str, second: str) -> None:
    text = LEARNERS.format(placement="thread", first=first, second=second)
    # DQN learns from its first moves on, so that its target's masks are used in the run.
    text = text.replace("params: {hidden_sizes: [16]}\n", f"params: {DQN_PARAMS}\n", 1) \
        if first == "DQN" else text
    path = write_experiment(tmp_path, text)
    store = tmp_path / "learners.sqlite"
    start(path, store)
    check_tictactoe(store, {"player_1": "first", "player_2": "second"}, 30)


def test_ppo_clearly_beats_a_random_connect_four_player(tmp_path: Path,
                                                        process_tag: str) -> None:
    # The example trains 3000 episodes for a win rate >= 0.9 (benchmarks/learning_connect_four.py);
    # a fifth of them already beats a random first player (about 0.55) clearly.
    text = edited(PPO_EXAMPLE.read_text(), ("episodes: 3000", "episodes: 600"),
                  ("episodes: 200", "episodes: 100"))
    path = write_experiment(tmp_path, text)
    store = tmp_path / "c4.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=200)
    assert result.returncode == 0, result.stderr
    assert [status for (status,) in query(store, "SELECT status FROM runs ORDER BY id")] == [
        "finished", "finished"]
    # Every game ended by four in a row or a full board: an illegal move would end one early,
    # with -1 for the mover alone.
    for (returns,) in query(store, "SELECT returns FROM episodes"):
        assert sum(json.loads(returns).values()) == 0
    assert win_rate(store, "test") >= 0.75


def test_self_play_records_the_snapshot_of_every_episode_alike_in_threads_and_processes(
        tmp_path: Path, process_tag: str) -> None:
    every, pool, episodes = 20, 3, 100
    base = edited(SELFPLAY_EXAMPLE.read_text(), ("episodes: 1000", f"episodes: {episodes}"),
                  ("episodes: 200", "episodes: 20"),
                  ("snapshot_every: 50", f"snapshot_every: {every}"),
                  ("pool_size: 5", f"pool_size: {pool}"),
                  ("\nplacement: thread\n", "\nplacement: thread\nevaluate_every: 50\n"
                                             "evaluate_episodes: 2\n"))
    seen = {}
    for placement in ("thread", "process"):
        text = edited(base, ("\nplacement: thread\n", f"\nplacement: {placement}\n"))
        path = write_experiment(tmp_path, text, f"{placement}.yml")
        store = tmp_path / f"{placement}.sqlite"
        result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                            timeout=200)
        assert result.returncode == 0, result.stderr
        (train, _), (test, _) = query(store, "SELECT id, status FROM runs ORDER BY id")
        rows = query(store, "SELECT episode, snapshots FROM episodes WHERE run_id = ? "
                            "AND NOT evaluation ORDER BY episode", train)
        assert [episode for episode, _ in rows] == list(range(episodes))
        played = {episode: json.loads(snapshots)["past"] for episode, snapshots in rows}
        for episode, taken in played.items():
            # One of the last `pool` snapshots, taken every `every` episodes from the first.
            newest = episode // every * every
            assert taken % every == 0 and newest - every * (pool - 1) <= taken <= newest
        assert all(taken == 0 for episode, taken in played.items() if episode < every)
        # mix plays the newest snapshot about half the time, and the older ones too.
        newest_played = sum(taken == episode // every * every for episode, taken in
                            played.items() if episode >= every * pool)
        assert 0 < newest_played < episodes - every * pool
        # Evaluation episodes play the snapshot of the training episode before them.
        evaluated = query(store, "SELECT episode, snapshots FROM episodes WHERE run_id = ? "
                                 "AND evaluation ORDER BY episode", train)
        assert [json.loads(snapshots)["past"] for _, snapshots in evaluated] == [
            played[49], played[49], played[99], played[99]]
        assert query(store, "SELECT COUNT(*), COUNT(snapshots) FROM episodes WHERE run_id = ?",
                     test) == [(20, 0)]
        seen[placement] = (query(store, "SELECT digest FROM runs ORDER BY id"), played)
    assert seen["thread"] == seen["process"]


def test_a_self_play_agent_of_an_unknown_agent_is_refused_before_anything_starts(
        tmp_path: Path) -> None:
    text = edited(SELFPLAY_EXAMPLE.read_text(), ("of: learner", "of: lerner"))
    path = write_experiment(tmp_path, text)
    result = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "x.sqlite"))
    assert result.returncode != 0
    assert "agents[1].self_play.of: no agent has uid 'lerner'" in result.stderr
    assert "did you mean 'learner'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "x.sqlite").exists()
