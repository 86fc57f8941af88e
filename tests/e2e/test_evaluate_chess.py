"""End to end: ``mosaic evaluate`` and ``mosaic manual`` on the LLM-vs-LLM chess evaluation
example, each player in its own chess worker, against two different fake models on loopback.

Every move is checked against the model's answer by replaying the game; the fallback and the
re-asked answers are counted for the player that made them, in the telemetry, the store and
the table. A bad game file exits 2 naming the file, the line and the key."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import chess
import pytest

from mosaic.operators.chess_position import legal_moves
from tests.e2e.cli import REPO, mosaic_command, query, run_mosaic, write_experiment
from tests.operators.chess_prompts import LastMoveModel, first_move
from tests.operators.llm_server import LLMTestServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

EXAMPLE = REPO / "examples" / "evaluate_chess_llm_vs_llm.yml"
PLIES = 6  # per game: three moves each


white_model = first_move


def black_model() -> LastMoveModel:
    """The last legal move shown, in UCI; its first answer of the run is illegal (asked again),
    and on its second move it never names a legal move (the fallback, after two re-asks)."""
    return LastMoveModel({0: "Let me play e2e4", 2: "hmm", 3: "hmm", 4: "still"})


def _evaluation(folder: Path, white: str, black: str, telemetry: str) -> Path:
    text = (EXAMPLE.read_text().replace("http://127.0.0.1:8000/v1", white)
            .replace("http://127.0.0.1:8001/v1", black)
            .replace("max_steps: 40 ", f"max_steps: {PLIES} ")
            .replace("telemetry: mosaic-telemetry/", f"telemetry: {telemetry}"))
    assert text.count(white) == 1 and text.count(black) == 1
    assert f"max_steps: {PLIES} " in text and "seeds: [7, 8] " in text
    return write_experiment(folder, text, "chess.yml")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _replay(steps: list[dict[str, Any]]) -> list[tuple[str, chess.Board, chess.Move]]:
    """(player, board before, move) of each step, through PettingZoo's action numbering."""
    board, played = chess.Board(), []
    for step in steps:
        move = legal_moves(board)[step["action"]]  # a KeyError is an illegal action
        assert step["move"] == move.uci()
        played.append((step["player"], board.copy(), move))
        board.push(move)
    return played


def test_llm_vs_llm_chess_runs_in_script_mode_with_telemetry_per_player(
        tmp_path: Path, process_tag: str) -> None:
    black = black_model()
    telemetry, store = tmp_path / "chess.jsonl", tmp_path / "chess.sqlite"
    with LLMTestServer(responder=white_model) as one, LLMTestServer(responder=black) as two:
        path = _evaluation(tmp_path, one.base_url, two.base_url, str(telemetry))
        result = run_mosaic("evaluate", str(path), "--store", str(store), timeout=100)
        white_asked, black_asked = list(one.requests), list(two.requests)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr

    # Each player asked its own model, from its own worker: one request per move, plus
    # Black's re-asks (one in the first move, two before the fallback of the second).
    assert {body["model"] for body in white_asked} == {"white-model"}
    assert {body["model"] for body in black_asked} == {"black-model"}
    assert len(white_asked) == PLIES  # two games of three moves
    assert len(black_asked) == PLIES + 1 + 2

    records = _lines(telemetry)
    header = records[0]
    assert header["operators"][0]["players"] == {
        "player_0": {"operator": "duel.player_0", "type": "llm",
                     "display_name": "White (white-model)"},
        "player_1": {"operator": "duel.player_1", "type": "llm",
                     "display_name": "Black (black-model)"}}
    steps = [r for r in records if r["kind"] == "step"]
    episodes = [r for r in records if r["kind"] == "episode"]
    assert [(r["episode"], r["seed"]) for r in episodes] == [(0, 7), (1, 8)]
    for episode in (0, 1):
        game = [s for s in steps if s["episode"] == episode]
        assert [s["actor"] for s in game] == ["duel.player_0", "duel.player_1"] * (PLIES // 2)
        for ply, (player, board, move) in enumerate(_replay(game)):
            listed = list(board.legal_moves)
            if player == "player_0":
                assert move == listed[0], (episode, ply, board.fen())
            elif (episode, ply) != (0, 3):  # Black's second move of the first game: fallback
                assert move == listed[-1], (episode, ply, board.fen())
    black_steps = [s for s in steps if s["player"] == "player_1"]
    assert [s["llm"]["source"] for s in black_steps] == (
        ["model", "fallback", "model"] + ["model"] * 3)
    assert [s["llm"]["illegal_replies"] for s in black_steps] == [1, 2, 0, 0, 0, 0]
    # A new game is a new conversation: White's first request of game 2 shows one position.
    assert [m["role"] for m in white_asked[PLIES // 2]["messages"]] == ["system", "user"]

    first = episodes[0]
    assert first["ended_by"] == "max_steps" and first["truncated"] and first["length"] == PLIES
    assert {player: (part["operator"], part["actions"], part["llm"]["fallbacks"])
            for player, part in first["players"].items()} == {
        "player_0": ("duel.player_0", 3, 0), "player_1": ("duel.player_1", 3, 1)}

    # The store: one run for the game, each step its player's, returns per player.
    [(run_id, status, run_episodes, run_steps)] = query(
        store, "SELECT id, status, episodes, steps FROM runs")
    assert (status, run_episodes, run_steps) == ("finished", 2, 2 * PLIES)
    rows = query(store, "SELECT agent, slot FROM steps WHERE run_id = ? AND episode = 0 "
                        "ORDER BY step", run_id)
    assert rows == [("duel.player_0", "player_0"), ("duel.player_1", "player_1")] * (PLIES // 2)
    fallbacks = query(store, "SELECT agent, COUNT(*), SUM(value) FROM metrics WHERE run_id = ? "
                             "AND name = 'llm.fallback' GROUP BY agent ORDER BY agent", run_id)
    assert fallbacks == [("duel.player_0", PLIES, 0), ("duel.player_1", PLIES, 1)]

    # The table: one row per player, its fallbacks beside it.
    assert re.search(r"duel\.player_0 \(White \(white-model\)\)\s+2/2 .* 0/6 +0", result.stdout)
    assert re.search(r"duel\.player_1 \(Black \(black-model\)\)\s+2/2 .* 1/6 +0", result.stdout)


def test_llm_vs_llm_chess_runs_in_manual_mode_step_all_and_reset_all(
        tmp_path: Path, process_tag: str) -> None:
    telemetry = tmp_path / "manual.jsonl"
    with LLMTestServer(responder=white_model) as one, LLMTestServer(responder=white_model) as two:
        path = _evaluation(tmp_path, one.base_url, two.base_url, str(telemetry))
        result = subprocess.run(
            [*mosaic_command(), "manual", str(path)], input="s\nn 2\nr\nq\n", cwd=REPO,
            capture_output=True, text=True, timeout=100,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stderr
    screens = result.stdout.split("\n> ")
    # After Step All White has moved and Black is to act; the board shows the knight's move.
    assert "  > player_1 [duel.player_1] Black (black-model): return 0 in 0 actions" in screens[1]
    assert "player_0 [duel.player_0] White (white-model): return 0 in 1 actions, last g1h3, " \
           "fallbacks 0/1" in screens[1]
    assert "  . . . . . . . N" in screens[1]
    assert "step 3" in screens[2]
    assert "episode 1 (seed 8)  step 0  (ready)" in screens[3]
    records = _lines(telemetry)
    assert records[0]["mode"] == "manual" and records[0]["operators"][0]["type"] == "game"
    steps = [(r["episode"], r["seed"], r["actor"]) for r in records if r["kind"] == "step"]
    assert steps == [(0, 7, "duel.player_0"), (0, 7, "duel.player_1"), (0, 7, "duel.player_0")]
    [abandoned, quit_] = [r for r in records if r["kind"] == "episode_abandoned"]
    assert (abandoned["ended_by"], abandoned["length"]) == ("reset", 3)
    assert abandoned["players"]["player_0"]["actions"] == 2
    assert (quit_["ended_by"], quit_["seed"]) == ("quit", 8)


BAD = """\
uid: bad-chess
operators:
  - id: duel
    env: pettingzoo:classic.chess_v6
    type: llm
    players:
      player_0: {type: random}
      player_2: {type: random}
seeds: [1]
"""


def test_a_bad_game_file_exits_2_naming_file_line_key_and_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD)
    result = run_mosaic("evaluate", str(bad), "--telemetry", str(tmp_path / "t.jsonl"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {bad}:5: operators[0].type: a game's workers are "
                                    "its players': type goes under each player")
    assert (f"{bad}:8: operators[0].players.player_2: pettingzoo:classic.chess_v6 has no "
            "player 'player_2' (its players: player_0, player_1) (hint: did you mean "
            "'player_1'?") in result.stderr.replace("\n  ", " ")
    assert "player 'player_1' of pettingzoo:classic.chess_v6 has no operator" in result.stderr
    assert list(tmp_path.iterdir()) == [bad]  # nothing started, no telemetry
