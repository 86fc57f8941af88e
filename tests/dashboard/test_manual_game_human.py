"""A person plays a game in Manual mode in the browser: White against an LLM in chess (the
example file, a fake model on loopback, a real headless Chromium), and both players of a
parallel game (rock paper scissors), each human player's moves checked before they are typed
at its worker's terminal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chess
import pytest
import yaml
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from mosaic.dashboard.manual import BrowserManual, CommandError
from tests.dashboard.browser import screenshot, wait_for
from tests.dashboard.conftest import REPO, opened_in_manual_mode
from tests.operators.chess_prompts import first_move
from tests.operators.llm_server import LLMTestServer

EXAMPLE = REPO / "examples" / "play_chess_against_llm.yml"
DUEL = '.panel[data-operator="duel"]'


def _cell(browser: Any, player: str, name: str) -> str:
    return str(browser.find_element(
        By.CSS_SELECTOR, f'{DUEL} tr[data-player="{player}"] td.{name}').text)


def _fact(browser: Any, name: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, f"{DUEL} strong.{name}").text)


def _status(browser: Any) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, f"{DUEL} .status").text)


def _move_buttons(browser: Any) -> list[str]:
    return [str(b.text) for b in browser.find_elements(
        By.CSS_SELECTOR, f'{DUEL} form.move[data-player="player_0"] button[data-move]')]


def _type_move(browser: Any, move: str) -> None:
    field = browser.find_element(By.CSS_SELECTOR, f'{DUEL} form.move input[name="move"]')
    field.clear()
    field.send_keys(move + Keys.ENTER)


def test_a_person_plays_white_against_an_llm_in_the_browser(
        browser: Any, tmp_path: Path, process_tag: str) -> None:
    after_e4 = chess.Board()
    after_e4.push_san("e4")
    black_reply = next(iter(after_e4.legal_moves))  # the fake model plays the first one shown
    with LLMTestServer(responder=first_move) as black:
        with opened_in_manual_mode(browser, EXAMPLE, tmp_path,
                                   {"http://127.0.0.1:8001/v1": black.base_url}):
            wait_for("White's move to be asked", lambda: _status(browser) == "your move", 60)
            assert _cell(browser, "player_0", "turn") == "▶"
            assert _cell(browser, "player_0", "type") == "human"
            buttons = _move_buttons(browser)
            assert len(buttons) == 20 and {"e4", "Nf3", "Nh3"} <= set(buttons)

            browser.find_element(By.ID, "step").click()  # the game waits for you alone
            wait_for("Step All to say so", lambda: browser.find_element(By.ID, "message").text
                     == "nothing to step: duel waits for your move", 30)

            _type_move(browser, "e5")  # not a legal move: refused, nothing moves
            wait_for("the refusal", lambda: "'e5' is not a legal move of player_0" in
                     browser.find_element(By.ID, "message").text, 30)
            assert "Nf3" in browser.find_element(By.ID, "message").text
            assert _fact(browser, "step") == "0" and _status(browser) == "your move"

            _type_move(browser, "e4")
            wait_for("White's e4", lambda: _fact(browser, "step") == "1"
                     and _status(browser) == "ready", 30)
            assert _cell(browser, "player_0", "last-move") == "e2e4"
            assert _cell(browser, "player_1", "turn") == "▶"
            assert not _move_buttons(browser)

            n = browser.find_element(By.ID, "n")
            n.clear()
            n.send_keys("5")
            browser.find_element(By.ID, "stepn").click()  # Black answers, then it waits for you
            wait_for("Black's answer, and White's turn", lambda: _fact(browser, "step") == "2"
                     and _status(browser) == "your move", 60)
            assert _cell(browser, "player_1", "last-move") == black_reply.uci()
            assert _cell(browser, "player_1", "fallbacks") == "0/1"
            screenshot(browser, "dashboard-manual-chess-human.png", tmp_path)

            browser.find_element(
                By.CSS_SELECTOR, f'{DUEL} form.move button[data-move="Nf3"]').click()
            wait_for("White's Nf3", lambda: _fact(browser, "step") == "3"
                     and _status(browser) == "ready", 30)
            assert _cell(browser, "player_0", "last-move") == "g1f3"
            assert _cell(browser, "player_0", "n-actions") == "2"

            browser.find_element(By.ID, "close").click()
            wait_for("the session to close", lambda: browser.find_element(
                By.ID, "shared").text == "closed", 30)
        assert len(black.requests) == 1


@pytest.fixture
def two_people(tmp_path: Path) -> Iterator[BrowserManual]:
    names = {"settings": {"action_names": ["rock", "paper", "scissors"]}}
    path = tmp_path / "rps.yml"
    path.write_text(yaml.safe_dump({
        "uid": "rps-people",
        "operators": [{"id": "rps", "env": "pettingzoo:classic.rps_v2",
                       "env_kwargs": {"api": "parallel"}, "players": {
            "player_0": {"type": "human", **names}, "player_1": {"type": "human", **names}}}],
        "seeds": [3],
        "max_steps": 10,
        "timeouts": {"reset": 60, "step": 30},
    }))
    manual = BrowserManual(path)
    try:
        manual.open()
        yield manual
    finally:
        manual.close()


def _game(manual: BrowserManual) -> dict[str, Any]:
    snapshot = manual.snapshot()
    assert snapshot["error"] is None, snapshot["error"]
    return dict(snapshot["operators"][0])


def _moves(game: dict[str, Any]) -> dict[str, Any]:
    return {player["player"]: player["moves"] for player in game["players"]}


def test_a_parallel_game_steps_once_every_person_it_waits_for_has_moved(
        two_people: BrowserManual, process_tag: str) -> None:
    game = _game(two_people)
    assert game["status"] == "your move" and game["steps"] == 0
    choices = [[0, "rock"], [1, "paper"], [2, "scissors"]]
    assert _moves(game) == {"player_0": choices, "player_1": choices}

    with pytest.raises(CommandError, match="nothing to step: rps waits for your move"):
        two_people.step_all(3)  # nobody but people plays: Step All leaves the game alone
    assert two_people.snapshot()["operators"][0]["steps"] == 0

    two_people.play("rps", "player_0", "paper")
    game = _game(two_people)
    assert game["steps"] == 0 and _moves(game) == {"player_0": None, "player_1": choices}
    with pytest.raises(CommandError, match="player_0 has moved; game 'rps' waits for player_1"):
        two_people.play("rps", "player_0", "rock")
    with pytest.raises(CommandError, match=r"'lizard' is not a legal move of player_1 now; "
                                           r"legal: rock, paper, scissors"):
        two_people.play("rps", "player_1", "lizard")
    with pytest.raises(CommandError, match="does not wait for a move of 'player_2'"):
        two_people.play("rps", "player_2", "rock")

    two_people.play("rps", "player_1", "ROCK")  # names are read ignoring case
    game = _game(two_people)
    assert game["steps"] == 1 and game["status"] == "your move"
    returns = {player["player"]: player["episode_return"] for player in game["players"]}
    assert returns == {"player_0": 1.0, "player_1": -1.0}  # paper covers rock
    assert {player["player"]: player["last_action"] for player in game["players"]} == {
        "player_0": 1, "player_1": 0}
    assert _moves(game) == {"player_0": choices, "player_1": choices}

    two_people.play("rps", "player_1", "2")  # an index is a move too
    two_people.reset_all(None)  # the move typed for the episode that ends is dropped
    two_people.play("rps", "player_0", "scissors")
    two_people.play("rps", "player_1", "scissors")
    game = _game(two_people)
    assert game["steps"] == 1 and game["episode_index"] == 1
    assert {player["player"]: player["last_action"] for player in game["players"]} == {
        "player_0": 2, "player_1": 2}
