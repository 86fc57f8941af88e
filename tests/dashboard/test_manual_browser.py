"""Manual mode in a real headless Chromium: panels side by side with frames, Step All, Step N,
Reset All on a shared seed, a human operator's buttons, and a crashed worker in its panel
while the others go on."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from selenium.webdriver.common.by import By

from tests.dashboard.browser import screenshot, wait_for
from tests.dashboard.conftest import served


def _evaluation(tmp_path: Path) -> Path:
    lake = {"env": "FrozenLake-v1", "env_kwargs": {"is_slippery": False}}
    data = {
        "uid": "lake-browser",
        "operators": [
            {"id": "random", "type": "random", "display_name": "Random", **lake},
            {"id": "passive", "type": "passive", "display_name": "Always left", **lake},
            {"id": "you", "type": "human", "display_name": "You", **lake,
             "settings": {"action_names": ["left", "down", "right", "up"]}},
            {"id": "crash", "type": "command", "display_name": "Crashes", **lake,
             "command": [sys.executable, "-c", "import sys; sys.exit(3)"]},
        ],
        "seeds": [42, 7],
        "max_steps": 50,
        "timeouts": {"reset": 60, "step": 30},
    }
    path = tmp_path / "lake.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def _panel(browser: Any, operator: str) -> Any:
    return browser.find_element(By.CSS_SELECTOR, f'.panel[data-operator="{operator}"]')


def _fact(browser: Any, operator: str, name: str) -> str:
    return str(_panel(browser, operator).find_element(By.CSS_SELECTOR, f"strong.{name}").text)


def _status(browser: Any, operator: str) -> str:
    return str(_panel(browser, operator).find_element(By.CSS_SELECTOR, ".status").text)


def _settled(browser: Any) -> bool:
    return "stepping" not in [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".status")]


def test_manual_mode_steps_and_resets_operators_side_by_side(
        browser: Any, tmp_path: Path, process_tag: str) -> None:
    with served(None, (_evaluation(tmp_path),)) as server:
        browser.get(server.url + "/manual/0")
        browser.find_element(By.ID, "open").click()
        wait_for("four panels, ready", lambda: len(browser.find_elements(
            By.CSS_SELECTOR, ".panel")) == 4 and _status(browser, "random") == "ready", 90)
        assert "episode 0, shared seed 42" in browser.find_element(By.ID, "shared").text
        assert _status(browser, "crash") == "failed"
        assert "exited" in _panel(browser, "crash").find_element(By.CSS_SELECTOR,
                                                                  ".failure").text
        frame = _panel(browser, "random").find_element(By.TAG_NAME, "img")
        assert frame.get_attribute("src").startswith("data:image/png;base64,")
        assert _status(browser, "you") == "your move"

        browser.find_element(By.ID, "step").click()
        wait_for("one step of the machines", lambda: _settled(browser) and _fact(
            browser, "random", "step") == "1" and _fact(browser, "passive", "step") == "1", 30)
        assert _fact(browser, "passive", "last-action") == "0"  # always left
        assert _fact(browser, "you", "step") == "0"  # Step All leaves the human to its buttons

        _panel(browser, "you").find_element(By.CSS_SELECTOR, 'button[data-action="2"]').click()
        wait_for("the human's step", lambda: _settled(browser) and _fact(
            browser, "you", "step") == "1", 30)
        assert _fact(browser, "you", "last-action") == "2"

        n = browser.find_element(By.ID, "n")
        n.clear()
        n.send_keys("3")
        browser.find_element(By.ID, "stepn").click()
        wait_for("three more steps of the passive operator", lambda: _settled(browser) and _fact(
            browser, "passive", "step") == "4", 30)
        screenshot(browser, "dashboard-manual.png", tmp_path)

        browser.find_element(By.ID, "seed").send_keys("7")
        browser.find_element(By.ID, "reset").click()
        wait_for("Reset All on seed 7", lambda: _settled(browser) and "shared seed 7" in
                 browser.find_element(By.ID, "shared").text, 30)
        for operator in ("random", "passive", "you"):
            assert _fact(browser, operator, "step") == "0"
            assert "(seed 7)" in _fact(browser, operator, "episode")
        assert _status(browser, "crash") == "failed"

        browser.find_element(By.ID, "close").click()
        wait_for("the session to close", lambda: browser.find_element(
            By.ID, "shared").text == "closed", 30)
