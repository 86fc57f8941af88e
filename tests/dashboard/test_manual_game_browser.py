"""Manual mode in a real headless Chromium on a game: LLM-vs-LLM chess from the example file, two
fake models on loopback, one panel with the board and its two players, Step All, Step N and
Reset All on a shared seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from tests.dashboard.browser import screenshot, wait_for
from tests.dashboard.conftest import REPO, opened_in_manual_mode
from tests.operators.chess_prompts import first_move
from tests.operators.llm_server import LLMTestServer

EXAMPLE = REPO / "examples" / "evaluate_chess_llm_vs_llm.yml"


def _row(browser: Any, player: str) -> Any:
    return browser.find_element(By.CSS_SELECTOR, f'.panel[data-operator="duel"] '
                                                 f'tr[data-player="{player}"]')


def _cell(browser: Any, player: str, name: str) -> str:
    return str(_row(browser, player).find_element(By.CSS_SELECTOR, f"td.{name}").text)


def _fact(browser: Any, name: str) -> str:
    return str(browser.find_element(
        By.CSS_SELECTOR, f'.panel[data-operator="duel"] strong.{name}').text)


def _status(browser: Any) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, '.panel[data-operator="duel"] .status').text)


def test_two_llms_play_chess_in_the_browser_step_all_and_reset_all(
        browser: Any, tmp_path: Path, process_tag: str) -> None:
    with LLMTestServer(responder=first_move) as white, \
            LLMTestServer(responder=first_move) as black:
        with opened_in_manual_mode(browser, EXAMPLE, tmp_path, {
                "http://127.0.0.1:8000/v1": white.base_url,
                "http://127.0.0.1:8001/v1": black.base_url}):
            wait_for("the game's panel, ready", lambda: _status(browser) == "ready", 60)
            assert "episode 0, shared seed 7" in browser.find_element(By.ID, "shared").text
            assert _fact(browser, "type") == "game"
            board = browser.find_element(By.CSS_SELECTOR, '.panel[data-operator="duel"] img')
            assert board.get_attribute("src").startswith("data:image/png;base64,")
            assert _cell(browser, "player_0", "name") == "White (white-model)"
            assert _cell(browser, "player_1", "name") == "Black (black-model)"
            assert _cell(browser, "player_0", "turn") == "▶"
            assert _cell(browser, "player_1", "turn") == ""

            browser.find_element(By.ID, "step").click()
            wait_for("White's move", lambda: _status(browser) == "ready"
                     and _fact(browser, "step") == "1", 30)
            assert _cell(browser, "player_0", "last-move") == "g1h3"  # Nh3, the first listed
            assert _cell(browser, "player_0", "fallbacks") == "0/1"
            assert _cell(browser, "player_1", "turn") == "▶"

            n = browser.find_element(By.ID, "n")
            n.clear()
            n.send_keys("3")
            browser.find_element(By.ID, "stepn").click()
            wait_for("three more moves", lambda: _status(browser) == "ready"
                     and _fact(browser, "step") == "4", 30)
            assert _cell(browser, "player_0", "n-actions") == "2"
            assert _cell(browser, "player_1", "n-actions") == "2"
            screenshot(browser, "dashboard-manual-chess.png", tmp_path)

            browser.find_element(By.ID, "reset").click()
            wait_for("Reset All on the next seed", lambda: _status(browser) == "ready" and
                     "shared seed 8" in browser.find_element(By.ID, "shared").text, 30)
            assert _fact(browser, "step") == "0"
            assert _cell(browser, "player_0", "n-actions") == "0"
            assert _cell(browser, "player_0", "turn") == "▶"

            browser.find_element(By.ID, "close").click()
            wait_for("the session to close", lambda: browser.find_element(
                By.ID, "shared").text == "closed", 30)
        assert {body["model"] for body in white.requests} == {"white-model"}
        assert {body["model"] for body in black.requests} == {"black-model"}
        assert len(white.requests) == 2 and len(black.requests) == 2
