"""The chess LLM worker and the routing of ``llm`` operators: the position is read exactly from
PettingZoo's chess observations, the worker (a real subprocess, against a fake model on
loopback) keeps one conversation per game, asks an illegal answer again with the reason and
then falls back, counted; the launcher picks the worker from the game unless the file names
one, and a missing package is named with its extra where the file is checked."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chess
import numpy as np
import pytest
from pettingzoo.classic import chess_v6

from mosaic.core.errors import ConfigError, MosaicError
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.chess_position import (
    ChessObservationError,
    board_from_observation,
    legal_moves,
)
from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.launcher import OperatorLauncher
from mosaic.operators.evaluation.schema import parse_evaluation
from tests.e2e.cli import run_mosaic
from workers.chess_worker import parse_move

from . import worker
from .llm_server import LLMTestServer, Reply

pytestmark = pytest.mark.timeout(60)


def random_games(games: int, seed: int) -> Iterator[tuple[dict[str, Any], chess.Board]]:
    """Every observation of ``games`` random games of chess_v6 with the true board."""
    rng = np.random.default_rng(seed)
    for game in range(games):
        env = chess_v6.env()
        env.reset(seed=game)
        try:
            for _ in env.agent_iter(300):
                observation, _, terminated, truncated, _ = env.last()
                if terminated or truncated:
                    break
                yield observation, env.unwrapped.board.copy()
                env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
        finally:
            env.close()


def test_the_position_and_its_moves_are_read_exactly_from_every_observation() -> None:
    seen = {"positions": 0, "en passant": 0, "castling": 0, "promotion": 0, "black": 0}
    for observation, truth in random_games(12, seed=5):
        board = board_from_observation(observation)
        assert board.board_fen() == truth.board_fen(), truth.fen()
        assert (board.turn, board.castling_rights) == (truth.turn, truth.castling_rights)
        assert board.ep_square in (truth.ep_square, None) and (
            board.has_legal_en_passant() == truth.has_legal_en_passant()), truth.fen()
        assert board.halfmove_clock // 2 == truth.halfmove_clock // 2
        moves = legal_moves(board, list(np.flatnonzero(observation["action_mask"])))
        assert set(moves.values()) == set(truth.legal_moves), truth.fen()
        seen["positions"] += 1
        seen["black"] += truth.turn == chess.BLACK
        seen["en passant"] += truth.has_legal_en_passant()
        seen["castling"] += any(truth.is_castling(m) for m in truth.legal_moves)
        seen["promotion"] += any(m.promotion for m in truth.legal_moves)
    assert all(seen.values()), seen  # every special case was met


def test_each_action_is_the_move_the_environment_plays() -> None:
    for index, (observation, truth) in enumerate(random_games(2, seed=9)):
        if index % 4 and not truth.has_legal_en_passant():
            continue  # a sample of positions, each en passant among them
        board = board_from_observation(observation)
        for action, move in legal_moves(board).items():
            env_board = truth.copy()
            env_board.push(_env_move(truth, action))
            expected = truth.copy()
            expected.push(move)
            assert expected.board_fen() == env_board.board_fen()


def _env_move(board: chess.Board, action: int) -> chess.Move:
    from pettingzoo.classic.chess import chess_utils

    return chess_utils.action_to_move(board, action, 0 if board.turn == chess.WHITE else 1)


def test_an_observation_of_another_game_or_other_legal_actions_is_refused() -> None:
    with pytest.raises(ChessObservationError, match="8x8x111"):
        board_from_observation(np.zeros((6, 7, 2)))
    start = board_from_observation(np.zeros((8, 8, 111)))  # chess_v6 before the first move
    assert start == chess.Board()
    with pytest.raises(ChessObservationError, match="is this PettingZoo's chess"):
        legal_moves(start, [0, 1, 2])


@pytest.mark.parametrize(("text", "move", "why"), [
    ("I play e4.", "e2e4", ""),
    ("<think>Maybe d4? No.</think> Nf3!", "g1f3", ""),
    ("g1f3", "g1f3", ""),
    ("E2E4 is my move", "e2e4", ""),
    ("Let me think. e5 is strong", None, "e5 is not a legal move in this position"),
    ("I resign", None, "no move was found in your reply"),
    ("e2e5 or e4", "e2e4", ""),
])
def test_a_move_is_read_in_san_or_uci_and_a_refusal_says_why(
        text: str, move: str | None, why: str) -> None:
    parsed, reason = parse_move(text, chess.Board())
    assert (parsed.uci() if parsed else None, reason) == (move, why)


# -- the worker as a subprocess, against a fake model ------------------------------------------


@pytest.fixture
def game() -> Iterator[Any]:
    env = chess_v6.env()
    env.reset(seed=1)
    yield env
    env.close()


def ask(handle: OperatorProcessHandle, env: Any) -> dict[str, Any]:
    observation = env.observe(env.agent_selection)
    legal = [int(a) for a in np.flatnonzero(observation["action_mask"])]
    return handle.select_action(observation, legal_actions=legal,
                                player_id=env.agent_selection, timeout=30)


def test_the_worker_keeps_one_conversation_per_game_asks_again_and_falls_back(
        start: Callable[..., OperatorProcessHandle], game: Any) -> None:
    with LLMTestServer(default=Reply("e4")) as server:
        server.add(Reply("I resign"), Reply("e2e5"), Reply("Then e4", prompt_tokens=7))
        handle = start(worker("chess_worker", "--base-url", server.base_url, "--model", "gm",
                              "--fallback", "first-legal", "--timeout", "20"))
        handle.init_agent("player_0", "chess", "chess_v6", {"n_actions": 4672}, timeout=30)
        handle.reset(3, timeout=10)
        first = ask(handle, game)
        e4 = next(a for a, m in legal_moves(chess.Board()).items() if m.uci() == "e2e4")
        assert first["action"] == e4 and first["move"] == "e2e4"
        assert first["fen"] == chess.STARTING_FEN
        assert first["llm"]["source"] == "model" and first["llm"]["illegal_replies"] == 2
        assert first["llm"]["prompt_tokens"] == 10 + 10 + 7  # every request of the move
        asked = [body["messages"] for body in server.requests]
        assert len(asked) == 3
        assert "no move was found in your reply" in asked[1][-1]["content"]
        assert "e2e5 is not a legal move" in asked[2][-1]["content"]
        assert [m["content"] for m in asked[2][1:-1]] == [  # one conversation, re-asks included
            asked[0][-1]["content"], "I resign", asked[1][-1]["content"], "e2e5"]

        game.step(first["action"])
        game.step(next(a for a, m in legal_moves(_board(game)).items() if m.uci() == "c7c5"))
        server.add(Reply("no idea"), Reply("pass"), Reply("Kxe8"))
        second = ask(handle, game)
        assert second["llm"]["source"] == "fallback" and second["llm"]["reason"] == "no_action"
        assert second["llm"]["illegal_replies"] == 2 and "Kxe8" in second["llm"]["error"]
        assert second["action"] == min(legal_moves(_board(game)))  # first-legal
        prompt = server.requests[3]["messages"]
        assert "Your opponent played c5." in prompt[-1]["content"]
        assert "FEN: rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2" in \
            prompt[-1]["content"]
        assert prompt[1]["content"] == asked[0][-1]["content"]  # the game so far, from turn 1

        fallen_back = _board(game).san(legal_moves(_board(game))[second["action"]])
        game.step(second["action"])
        game.step(min(legal_moves(_board(game))))
        server.add(Reply("Nf3"))
        ask(handle, game)  # the next turn tells the model what was played in its name
        assert server.requests[-1]["messages"][-1]["content"].startswith(
            f"No answer could be used, so {fallen_back} was played for you.\nYour opponent")

        handle.reset(4, timeout=10)  # a new game: a new conversation
        game.reset(seed=2)
        ask(handle, game)
        assert [m["role"] for m in server.requests[-1]["messages"]] == ["system", "user"]


def _board(env: Any) -> chess.Board:
    return board_from_observation(env.observe(env.agent_selection))


def test_the_worker_refuses_an_observation_that_is_no_chess_position(
        start: Callable[..., OperatorProcessHandle]) -> None:
    with LLMTestServer() as server:
        handle = start(worker("chess_worker", "--base-url", server.base_url, "--model", "gm"))
        with pytest.raises(MosaicError, match="8x8x111"):
            handle.select_action([0.1, 0.2], legal_actions=[0, 1], timeout=30)
        assert server.requests == []


# -- routing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("task", "worker_setting", "module"), [
    ("chess_v6", None, "workers.chess_worker"),
    ("pettingzoo:classic.chess_v6", "auto", "workers.chess_worker"),
    ("BabyAI-GoToRedBall-v0", None, "workers.balrog_worker"),
    ("MiniGrid-Empty-5x5-v0", None, "workers.balrog_worker"),
    ("FrozenLake-v1", None, "workers.llm_worker"),
    ("chess_v6", "llm", "workers.llm_worker"),
    ("FrozenLake-v1", "chess", "workers.chess_worker"),
])
def test_an_llm_operator_runs_the_worker_of_its_game_unless_its_file_names_one(
        task: str, worker_setting: str | None, module: str) -> None:
    settings: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                                "move_retries": 1}
    if worker_setting is not None:
        settings["worker"] = worker_setting
    config = OperatorConfig.single_agent("op", "llm", "op", "op", "", task, settings)
    argv = OperatorLauncher().build_command(config, "run")
    assert argv[1:3] == ["-m", module]
    assert ("--move-retries" in argv) == (module == "workers.chess_worker")


def test_an_unknown_worker_is_refused_where_the_file_is_checked() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_evaluation({"uid": "x", "seeds": [1], "operators": [
            {"id": "a", "type": "llm", "env": "CartPole-v1",
             "settings": {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                          "worker": "cheess"}}]})
    assert "operators[0].settings.worker" in str(caught.value)
    assert "expected 'auto', 'llm', 'chess', 'balrog' or 'vlm', got the text 'cheess' " \
        "(hint: did you mean 'chess'?)" in str(caught.value)


def test_a_missing_python_chess_is_named_with_its_extra_and_exit_2(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "chess.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'chess'\", name='chess')\n")
    path = tmp_path / "eval.yml"
    path.write_text("uid: x\nseeds: [1]\noperators:\n  - id: a\n    type: llm\n"
                    "    env: CartPole-v1\n    settings: {base_url: 'http://127.0.0.1:9/v1', "
                    "model: m, worker: chess}\n")
    result = run_mosaic("evaluate", str(path), PYTHONPATH=str(hidden))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"error: {path}:7: operators[0].settings.worker: the chess LLM worker needs chess, "
        "which is not installed: pip install 'mosaic[chess]' (hint: install it, or set "
        "settings.worker to another worker)"]
