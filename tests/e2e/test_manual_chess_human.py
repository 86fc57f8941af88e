"""End to end: ``mosaic manual`` on a real pseudo-terminal, a person playing White against an
LLM (``examples/play_chess_against_llm.yml``, a fake model on loopback). The human worker asks
for White's move on the command's own terminal (the board, its FEN, the legal moves in SAN), an
illegal move is asked again, and the telemetry names each player's move."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path

import chess
import pytest

from tests.e2e.cli import REPO, mosaic_command
from tests.operators.chess_prompts import first_move
from tests.operators.llm_server import LLMTestServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

EXAMPLE = REPO / "examples" / "play_chess_against_llm.yml"


class Console:
    """The command's terminal: what it wrote so far, and lines typed at it."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.seen = b""

    def wait(self, text: str, after: int, timeout: float = 60.0) -> int:
        """Read until ``text`` appears past offset ``after``; its end."""
        wanted, deadline = text.encode(), time.monotonic() + timeout
        while (found := self.seen.find(wanted, after)) < 0:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} in 60 s; the terminal shows:\n{self.text()[-2000:]}"
            if select.select([self.master], [], [], min(left, 0.2))[0]:
                with contextlib.suppress(OSError):  # the command ended, its terminal gone
                    self.seen += os.read(self.master, 65536)
        return found + len(wanted)

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def text(self) -> str:
        return self.seen.decode("utf-8", "replace")


def test_a_person_plays_white_in_the_terminal(tmp_path: Path, process_tag: str) -> None:
    telemetry = tmp_path / "manual.jsonl"
    with LLMTestServer(responder=first_move) as black:
        path = tmp_path / "chess.yml"
        path.write_text(EXAMPLE.read_text()
                        .replace("http://127.0.0.1:8001/v1", black.base_url)
                        .replace("telemetry: mosaic-telemetry/", f"telemetry: {telemetry}"))
        master, slave = os.openpty()
        command = subprocess.Popen(
            [*mosaic_command(), "manual", str(path)], cwd=REPO, stdin=slave, stdout=slave,
            stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True)
        os.close(slave)
        console = Console(master)
        try:
            at = console.wait("\n> ", 0)
            console.type("s")  # Step All: White's move is yours
            at = console.wait("choose action> ", at)
            asked = console.text()
            assert "FEN rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1" in asked
            assert "legal moves: " in asked and " Nf3 " in asked
            console.type("e5")
            at = console.wait("invalid choice 'e5'", at)
            at = console.wait("choose action> ", at)
            console.type("e4")
            at = console.wait("\n> ", at)
            console.type("s")  # Black's answer, from the model
            at = console.wait("\n> ", at)
            console.type("q")
            _, stderr = command.communicate(timeout=60)
        finally:
            if command.poll() is None:
                command.kill()
                command.wait(timeout=10)
            os.close(master)
        assert command.returncode == 0, stderr + console.text()[-2000:]
    steps = [record for record in map(json.loads, telemetry.read_text().splitlines())
             if record["kind"] == "step"]
    after_e4 = chess.Board()
    after_e4.push_san("e4")
    assert [(s["player"], s["move"]) for s in steps] == [
        ("player_0", "e2e4"), ("player_1", next(iter(after_e4.legal_moves)).uci())]
    assert len(black.requests) == 1
