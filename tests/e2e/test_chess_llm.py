"""End to end: two LLMs play chess against each other through ``mosaic experiment-start`` on
the example, each in its own chess worker, against two different fake models on loopback; then
a PPO policy learns Black's seat against a random mover, and one of the LLMs plays it. Every
move is the model's, checked by replaying the game; the re-asked answers and the fallback are
counted for the player that made them."""

from __future__ import annotations

import re
from pathlib import Path

import chess
import pytest

from mosaic.messages.codec import unpack
from mosaic.operators.chess_position import legal_moves
from tests.e2e.cli import REPO, query, run_mosaic, write_experiment
from tests.operators.chess_prompts import LastMoveModel, first_move
from tests.operators.llm_server import LLMTestServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

EXAMPLE = REPO / "examples" / "chess_llm_vs_llm.yml"
PLIES = 10  # per game: five moves each


white_model = first_move


def black_model() -> LastMoveModel:
    """The last legal move shown, in UCI; but on its first move it first refuses and then
    names an illegal move, and on its second it never names a legal one (the fallback)."""
    return LastMoveModel({0: "I resign.", 1: "Let me play e2e4", 3: "hmm", 4: "hmm",
                          5: "still thinking"})


def replay(actions: list[tuple[str, int]]) -> list[tuple[str, chess.Board, chess.Move]]:
    """(agent, board before, move) of each recorded action, through PettingZoo's action
    numbering."""
    board, played = chess.Board(), []
    for agent, action in actions:
        move = legal_moves(board)[action]  # a KeyError is an illegal action
        played.append((agent, board.copy(), move))
        board.push(move)
    return played


def metric(store: Path, run_id: int, agent: str, name: str) -> tuple[int, float]:
    [(count, total)] = query(store, "SELECT COUNT(*), COALESCE(SUM(value), 0) FROM metrics "
                                    "WHERE run_id = ? AND agent = ? AND name = ?",
                             run_id, agent, name)
    return count, total


def test_two_llms_play_chess_each_in_its_worker_then_one_plays_a_trained_policy(
        tmp_path: Path, process_tag: str) -> None:
    black = black_model()
    with LLMTestServer(responder=white_model) as one, LLMTestServer(responder=black) as two:
        text = (EXAMPLE.read_text().replace("http://127.0.0.1:8000/v1", one.base_url)
                .replace("http://127.0.0.1:8001/v1", two.base_url)
                .replace("episodes: 2 ", "episodes: 1 ").replace("episodes: 6", "episodes: 2")
                .replace("rollout_steps: 64", "rollout_steps: 4")
                .replace("max_steps: 40 ", f"max_steps: {PLIES} "))
        assert text.count(one.base_url) == 2 and two.base_url in text
        assert "episodes: 2\n" in text and text.count("rollout_steps: 4}") == 2
        assert f"max_steps: {PLIES} " in text and "episodes: 1 " in text
        path = write_experiment(tmp_path, text, "chess.yml")
        store = tmp_path / "chess.sqlite"
        result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=150)
        white_asked, black_asked = list(one.requests), list(two.requests)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    runs = query(store, "SELECT id, uid, status, episodes, steps FROM runs ORDER BY id")
    assert [(uid.rsplit("-r0-", 1)[1], status, episodes, steps)
            for _, uid, status, episodes, steps in runs] == [
        ("llm-vs-llm", "finished", 1, PLIES), ("train-black", "finished", 2, 2 * PLIES),
        ("llm-vs-trained", "finished", 1, PLIES)]
    (duel, *_), (training, *_), (against_policy, *_) = runs

    # Each player asked its own model, in its own worker.
    assert {body["model"] for body in white_asked} == {"white-model"}
    assert {body["model"] for body in black_asked} == {"black-model"}
    assert len(white_asked) == PLIES  # one request per move, in both games
    assert len(black_asked) == 3 + 3 + (PLIES // 2 - 2)  # two re-asks, then three and the fallback

    # Every move was the model's: White's the first legal move shown, Black's the last, but
    # for Black's second move, the fallback.
    rows = query(store, "SELECT agent, action FROM steps WHERE run_id = ? ORDER BY id", duel)
    played = replay([(agent, unpack(action)) for agent, action in rows])
    assert [agent for agent, _, _ in played] == ["white", "black"] * (PLIES // 2)
    for ply, (agent, board, move) in enumerate(played):
        listed = list(board.legal_moves)
        if agent == "white":
            assert move == listed[0], (ply, board.fen())
        elif ply != 3:
            assert move == listed[-1], (ply, board.fen())

    # One conversation per game: White's last request holds the whole game, and says what
    # Black played.
    last = white_asked[PLIES // 2 - 1]["messages"]
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert f"Your opponent played {played[-3][1].san(played[-3][2])}." in last[-1]["content"]
    # Black's re-asks carried the reason.
    assert "no move was found in your reply" in black_asked[1]["messages"][-1]["content"]
    assert "e2e4 is not a legal move" in black_asked[2]["messages"][-1]["content"]

    # Telemetry per player: actions, fallbacks, re-asked answers and tokens.
    assert metric(store, duel, "white", "llm.fallback") == (PLIES // 2, 0)
    assert metric(store, duel, "black", "llm.fallback") == (PLIES // 2, 1)
    assert metric(store, duel, "black", "llm.fallback.no_action") == (1, 1)
    assert metric(store, duel, "white", "llm.illegal_replies") == (PLIES // 2, 0)
    assert metric(store, duel, "black", "llm.illegal_replies") == (PLIES // 2, 4)
    assert metric(store, duel, "white", "llm.prompt_tokens") == (PLIES // 2, 10 * PLIES // 2)
    assert metric(store, duel, "black", "llm.prompt_tokens") == (PLIES // 2,
                                                                 10 * len(black_asked))
    assert metric(store, against_policy, "white", "llm.fallback") == (PLIES // 2, 0)
    assert metric(store, against_policy, "black", "llm.fallback") == (0, 0)
    # Black's policy learned in train-black (PPO updated on its own moves there), and played
    # the last game in mode test: legal moves, and no learning.
    assert metric(store, training, "black", "policy_loss")[0] == PLIES // 4  # 10 moves, 4 a go
    assert metric(store, against_policy, "black", "policy_loss") == (0, 0)
    moves = query(store, "SELECT agent, action FROM steps WHERE run_id = ? ORDER BY id",
                  against_policy)
    assert [agent for agent, _ in moves] == ["white", "black"] * (PLIES // 2)
    replay([(agent, unpack(action)) for agent, action in moves])  # every move legal
    assert re.search(r"LLM fallbacks: \S+-llm-vs-llm: 1 of 10 actions", result.stdout)
