"""A game in an evaluation file: one lane, one worker per player under one multi-agent handle,
each player an actor of the lane's ActorService chosen by a PolicyMappingService, with the seeds'
semantics (seed broadcast before Reset All, unknown ids raise, None is a no-op, an exception
aborts the episode); and the file's checks of its players.

Real workers on PettingZoo's tic-tac-toe (players ``player_1`` and ``player_2``, 9 actions).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mosaic.core.errors import ConfigError
from mosaic.operators.evaluation._game import GameLane, PlayerActor
from mosaic.operators.evaluation._session import EvaluationSession
from mosaic.operators.evaluation.schema import parse_evaluation
from mosaic.operators.evaluation.script import operator_config_for, run_script

pytestmark = pytest.mark.timeout(60)

FIXTURE = Path(__file__).parent / "script_fixtures" / "null_player.py"
GAME = "pettingzoo:classic.tictactoe_v3"


def evaluation(players: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"uid": "ttt", "operators": [{"id": "game", "env": GAME, "players": players}],
            "seeds": [3, 4], "max_steps": 6, "timeouts": {"step": 20, "reset": 30, "stop": 3},
            **extra}


def command_player(mode: str) -> dict[str, Any]:
    return {"type": "command", "command": [sys.executable, str(FIXTURE), "--mode", mode]}


RANDOM = {"player_1": {"type": "random"}, "player_2": {"type": "random", "display_name": "O"}}


@pytest.fixture
def session() -> Iterator[EvaluationSession]:
    config = parse_evaluation(evaluation(RANDOM))
    made = EvaluationSession([operator_config_for(s, config) for s in config.operators],
                             config.timeouts, 0.5, launcher=None, run_id="game-test")
    try:
        yield made
    finally:
        made.close()


def test_the_players_are_actors_mapped_by_player_and_the_seed_is_broadcast_to_them(
        session: EvaluationSession) -> None:
    session.launch_all()
    [lane] = session.lanes
    assert isinstance(lane, GameLane)
    assert lane.players.actor_ids() == ["game.player_1", "game.player_2"]
    assert lane.players.active_actor_id == "game.player_1"  # the first registered
    assert lane.mapping.mappings() == {"player_1": "game.player_1", "player_2": "game.player_2"}
    assert sorted(session.workers.handles) == ["game"]  # one operator, two workers
    assert sorted(session.workers.handles["game"].players) == ["player_1", "player_2"]

    assert session.reset_all(0, 41) == [lane]
    actors = [lane.players.get_actor(a) for a in lane.players.actor_ids()]
    assert all(isinstance(a, PlayerActor) and a.next_seed == 41 for a in actors)
    assert session.step(session.lanes) == 1
    assert session.step(session.lanes) == 1
    steps = [r for r in lane.drain() if r["kind"] == "step"]
    assert [(r["actor"], r["seed"], r["step_index"]) for r in steps] == [
        ("game.player_1", 41, 0), ("game.player_2", 41, 1)]
    assert lane.players.active_actor_id == "game.player_2"  # activated for its turn


def test_a_player_no_actor_plays_raises_and_aborts_the_episode(
        session: EvaluationSession) -> None:
    session.launch_all()
    [lane] = session.lanes
    assert isinstance(lane, GameLane)
    session.reset_all(0, 5)
    lane.mapping.remove_mapping("player_2")
    assert session.step(session.lanes) == 1  # player_1 moves
    assert session.step(session.lanes) == 0  # nobody plays player_2
    failure = lane.result.failure
    assert failure is not None and (failure.phase, failure.cause) == ("step", "error")
    assert "KeyError" in failure.message and "no actor is mapped to agent 'player_2'" in \
        failure.message
    assert not lane.alive and session.workers.handles == {}  # its workers were stopped
    assert all(r.failure is failure for r in lane.results().values())


def test_none_is_the_noop_and_an_error_reply_aborts_the_episode(tmp_path: Path) -> None:
    config = parse_evaluation(evaluation(
        {"player_1": command_player("none"), "player_2": command_player("error")}))
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl")
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    [step] = [r for r in records if r["kind"] == "step"]
    assert (step["player"], step["action"]) == ("player_1", 0)  # None: the first legal action
    [failure] = [r for r in records if r["kind"] == "failure"]
    assert (failure["phase"], failure["cause"], failure["step_index"]) == ("step", "error", 1)
    assert "its player 'game.player_2': its worker reported an error" in failure["message"]
    assert "this player refuses to move" in failure["message"]
    assert not result.ok and len(result.failures) == 1  # one failure, shared by both players
    assert sorted(result.operators) == ["game.player_1", "game.player_2"]


def test_the_same_file_plays_the_same_games(tmp_path: Path) -> None:
    config = parse_evaluation(evaluation(RANDOM))
    played = []
    for run in (1, 2):
        path = tmp_path / f"{run}.jsonl"
        assert run_script(config, telemetry_path=path).ok
        played.append([line for line in path.read_text().splitlines()
                       if '"kind":"step"' in line or '"kind":"episode"' in line])
    assert played[0] == played[1] and len(played[0]) > 4
    # Each episode's digest: the same moves from the same seed, the same digest.
    digests = [json.loads(line)["digest"] for line in played[0] if '"kind":"episode"' in line]
    assert len(digests) == 2 and digests[0] != digests[1]
    assert all(len(bytes.fromhex(digest)) == 16 for digest in digests)
    # The two random players draw from their own seeds: not the same stream.
    steps = [json.loads(line) for line in played[0] if '"kind":"step"' in line]
    assert {s["seed"] for s in steps} == {3, 4}


def test_each_player_is_told_every_reward_since_its_last_move() -> None:
    config = parse_evaluation(evaluation(RANDOM, max_steps=9))
    session = EvaluationSession([operator_config_for(s, config) for s in config.operators],
                                config.timeouts, 0.5, launcher=None, run_id="game-test")
    try:
        session.launch_all()
        [lane] = session.lanes
        told: list[tuple[str | None, Any, float, bool]] = []
        # Each settled move's feedback, as the lane's ActorService hands it to the player's
        # actor (a worker takes none in agent mode; an in-process operator would).
        lane.players.notify_step = lambda snapshot: told.append(  # type: ignore[method-assign]
            (snapshot.agent_id, snapshot.action, snapshot.reward, snapshot.terminated))
        for seed in (2, 4):
            told.clear()
            session.reset_all(0, seed)
            while lane.in_episode:
                assert session.step(session.lanes) == 1
            records = lane.drain()
            [episode] = [r for r in records if r["kind"] == "episode"]
            moves = [(r["player"], r["action"]) for r in records if r["kind"] == "step"]
            # One feedback per move, and a player's feedback sums to its return.
            assert sorted((p, a) for p, a, _, _ in told) == sorted(moves)
            for player, summary in episode["players"].items():
                assert sum(r for p, _, r, _ in told if p == player) == summary["return"]
            if seed == 2:  # X wins with its 4th move: O's -1 comes with it, to O's last move
                assert episode["players"]["player_1"]["return"] == 1.0
                assert told[-2:] == [("player_2", moves[-2][1], -1.0, True),
                                     ("player_1", moves[-1][1], 1.0, True)]
    finally:
        session.close()


@pytest.mark.parametrize(("operator", "where", "what"), [
    ({"id": "g", "env": GAME, "players": {"player_1": {"type": "random"}}},
     "operators[0].players", "player 'player_2' of pettingzoo:classic.tictactoe_v3 has no "
                             "operator"),
    ({"id": "g", "env": GAME, "players": {**RANDOM, "player_3": {"type": "random"}}},
     "operators[0].players.player_3", "has no player 'player_3' (its players: player_1, "
                                      "player_2)"),
    ({"id": "g", "env": GAME, "type": "random"}, "operators[0].env",
     "is a game with players; a one-worker operator owns a Gymnasium environment"),
    ({"id": "g", "env": "CartPole-v1", "players": RANDOM}, "operators[0].env",
     "not a game with players"),
    ({"id": "g", "env": GAME, "players": {**RANDOM, "player_2": {"type": "llm"}}},
     "operators[0].players.player_2.settings.base_url", "required key is missing"),
    ({"id": "g", "env": GAME}, "operators[0].type", "required: a type"),
])
def test_a_bad_game_entry_is_named_by_its_key(operator: dict[str, Any], where: str,
                                              what: str) -> None:
    data = {"uid": "ttt", "operators": [operator], "seeds": [1]}
    with pytest.raises(ConfigError) as caught:
        parse_evaluation(data, "game.yml")
    text = str(caught.value)
    assert f"{where}: " in text and what in text, text


def test_a_player_worker_id_may_not_be_another_operators_id() -> None:
    data = {"uid": "ttt", "seeds": [1], "operators": [
        {"id": "g", "env": GAME, "players": RANDOM},
        {"id": "g.player_1", "type": "random", "env": "CartPole-v1"}]}
    with pytest.raises(ConfigError, match=r"operators\[1\]\.id: duplicate operator id "
                                          r"'g\.player_1' \(also operators\[0\]\)"):
        parse_evaluation(data, "game.yml")


def test_a_player_with_too_many_fallbacks_fails_the_game_by_name(tmp_path: Path) -> None:
    from tests.operators.llm_server import LLMTestServer, Reply

    with LLMTestServer(default=Reply("I would rather not say")) as server:
        llm = {"type": "llm", "settings": {"base_url": server.base_url, "model": "m",
                                           "max_retries": 0}}
        config = parse_evaluation(evaluation({"player_1": {"type": "random"}, "player_2": llm},
                                             max_fallback_fraction=0.4))
        result = run_script(config, telemetry_path=tmp_path / "t.jsonl")
    assert [r.episodes_done for r in result.operators.values()] == [1, 1]  # then it failed
    [failure] = result.failures
    assert failure.phase == "fallbacks" and failure.episode_index == 0
    assert "its player 'game.player_2': 3 of 3 actions (100%) came from the fallback" in \
        failure.message
    tallies = {key: (r.llm.fallbacks, r.llm.actions) if r.llm else None
               for key, r in result.operators.items()}
    assert tallies == {"game.player_1": None, "game.player_2": (3, 3)}


def rock_paper_scissors(meet: Path, step_timeout: float, meeting: int = 2) -> Any:
    """A parallel game of two players that answer only once ``meeting`` players were asked."""
    meet.mkdir()
    player = {"type": "command", "command": [
        sys.executable, str(FIXTURE), "--mode", "rendezvous", "--meet", str(meet),
        "--players", str(meeting)]}
    return parse_evaluation({
        "uid": "rps", "seeds": [3], "max_steps": 3,
        "timeouts": {"step": step_timeout, "reset": 30, "stop": 3},
        "operators": [{"id": "game", "env": "pettingzoo:classic.rps_v2",
                       "env_kwargs": {"api": "parallel"},
                       "players": {"player_0": player, "player_1": player}}]})


def test_a_parallel_games_players_are_asked_together(tmp_path: Path) -> None:
    # Each worker answers only once the other has been asked too (or fails after 10 s): the
    # game lane sends every acting player's select_action before it awaits any answer.
    meet = tmp_path / "meet"
    config = rock_paper_scissors(meet, 20)
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl")
    assert result.ok, result.failures
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    steps = [(r["step_index"], r["player"], r["action"]) for r in records if r["kind"] == "step"]
    assert steps == [(i, p, 0) for i in range(3) for p in ("player_0", "player_1")]
    assert sorted(path.name for path in meet.iterdir()) == [
        f"player_{p}-{n}" for p in (0, 1) for n in (1, 2, 3)]


def test_a_parallel_player_that_does_not_answer_fails_the_game_by_the_step_timeout(
        tmp_path: Path) -> None:
    # They wait for a third player that never comes: no answer within the step timeout.
    result = run_script(rock_paper_scissors(tmp_path / "meet", 1.0, meeting=3),
                        telemetry_path=tmp_path / "t.jsonl")
    [failure] = result.failures
    assert (failure.phase, failure.cause, failure.step_index) == ("step", "timeout", 0)
    assert "its player 'game.player_0': its worker sent no reply within 1 s (the step " \
           "timeout)" in failure.message
