"""The runs pages in a real headless Chromium: content, search, a live run that advances and
then fails without a page reload, the chart, comparison and replay."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from mosaic.store import StoreWriter
from tests.dashboard.browser import screenshot, wait_for
from tests.dashboard.conftest import served


def _row(browser: Any, run_id: int) -> Any:
    return browser.find_element(By.CSS_SELECTOR, f'.row[data-run="{run_id}"]')


def _shown(browser: Any, run_id: int) -> bool:
    return bool(browser.execute_script(
        "return getComputedStyle(arguments[0]).display !== 'none'", _row(browser, run_id)))


def _cells(browser: Any, run_id: int) -> list[str]:
    return [c.text for c in _row(browser, run_id).find_elements(By.XPATH, "./div")]


def test_runs_page_lists_every_run_and_searches(cartpole_store: Path, browser: Any,
                                                tmp_path: Path) -> None:
    with served(cartpole_store) as server:
        browser.get(server.url + "/")
        rows = browser.find_elements(By.CSS_SELECTOR, ".row[data-run]")
        assert len(rows) == 2
        text = browser.find_element(By.ID, "runs").text
        assert "cartpole-two-runs" in text and "finished" in text
        digest = _row(browser, 1).find_element(By.CSS_SELECTOR, ".mono").get_attribute("title")
        assert len(digest) == 32  # the run's stored digest, in full on hover
        browser.find_element(By.ID, "search").send_keys("r1")
        wait_for("the search to hide run 1", lambda: not _shown(browser, 1))
        assert _shown(browser, 2)
        assert "1 of 2 runs" in browser.find_element(By.ID, "shown").text
        browser.find_element(By.ID, "search").send_keys(Keys.CONTROL, "a", Keys.BACKSPACE)
        wait_for("every run to show again", lambda: _shown(browser, 1))
        for box in browser.find_elements(By.CSS_SELECTOR, "input.pick"):
            box.click()
        browser.find_element(By.ID, "compare").click()
        wait_for("two lines on the comparison chart",
                 lambda: len(browser.find_elements(By.CSS_SELECTOR, "#chart polyline")) == 2)
        assert "/compare?runs=1,2" in browser.current_url


def test_a_live_run_advances_and_fails_without_reload(writer: StoreWriter, browser: Any,
                                                      tmp_path: Path) -> None:
    experiment = writer.experiment_started("live-demo", None, {"environments": []})
    done = writer.run_started(experiment, "live-demo-r0", 0, 7)
    writer.run_finished(done, "finished", None, 0, 0, digest="ab" * 16)
    for index, (status, error) in enumerate((("failed", "ValueError: lr must be > 0"),
                                             ("cancelled", "cancelled by SIGINT")), start=2):
        ended = writer.run_started(experiment, f"live-demo-r{index}", index, 10 + index,
                                   params={"agents.lr": -0.1 * index})
        for episode in range(4):
            writer.record_episode(ended, "env", episode, 12, 1.5 * episode, {}, True, False, 0)
        writer.run_finished(ended, status, error, 4, 48, digest=f"{index:02d}" * 16)
    run = writer.run_started(experiment, "live-demo-r1", 1, 8, params={"agents.lr": 0.01})
    writer.record_transition(run, None, "running", "started")
    for episode in range(3):
        writer.record_episode(run, "env", episode, 10, float(episode), {"agent_0": episode},
                              True, False, episode)
    assert writer.flush()
    with served(tmp_path / "live.sqlite") as server:
        browser.get(server.url + "/")
        browser.execute_script("window.sameDocument = true;")
        assert _cells(browser, run)[2] == "running" and _cells(browser, run)[4] == "3"
        wait_for("the live channel to open",
                 lambda: "on" in browser.find_element(By.ID, "live").get_attribute("class"))
        for episode in range(3, 8):
            writer.record_episode(run, "env", episode, 10, float(episode), {}, True, False, 0)
        assert writer.flush()
        wait_for("the row to show 8 episodes", lambda: _cells(browser, run)[4] == "8", 5)
        screenshot(browser, "dashboard-runs.png", tmp_path)

        browser.get(f"{server.url}/runs/{run}")
        browser.execute_script("window.sameDocument = true;")
        line = wait_for("the learning curve", lambda: browser.find_element(
            By.CSS_SELECTOR, "#chart polyline.line"))
        assert line.get_attribute("data-n") == "8"
        writer.record_episode(run, "env", 8, 10, 8.0, {}, True, False, 0)
        assert writer.flush()
        wait_for("the curve to grow to 9 episodes", lambda: browser.find_element(
            By.CSS_SELECTOR, "#chart polyline.line").get_attribute("data-n") == "9", 5)
        writer.record_transition(run, "running", "failed", "the environment crashed")
        writer.run_finished(run, "failed", "EnvironmentError: the environment crashed", 9, 90)
        assert writer.flush()
        wait_for("the failure to show", lambda: "the environment crashed" in browser.find_element(
            By.ID, "failure").text, 5)
        assert "failed" in browser.find_element(By.ID, "summary").text
        assert "the environment crashed" in browser.find_element(By.ID, "transitions").text
        assert browser.execute_script("return window.sameDocument === true;")


def test_replay_re_simulates_an_episode_and_checks_its_digest(cartpole_store: Path,
                                                              browser: Any) -> None:
    with served(cartpole_store) as server:
        browser.get(f"{server.url}/runs/1")
        link = browser.find_element(By.CSS_SELECTOR, "a.replay")
        link.click()
        verdict = wait_for("the replay verdict", lambda: (
            browser.find_element(By.ID, "verdict").text
            if "digest" in browser.find_element(By.ID, "verdict").text else None), 60)
        assert "Same episode" in verdict and "verified" in verdict
        frame = browser.find_element(By.ID, "frame")
        assert frame.get_attribute("src").startswith("data:image/png;base64,")
        assert browser.execute_script("return arguments[0].naturalWidth", frame) == 600
        browser.find_element(By.ID, "play").click()
        wait_for("the replay to move on", lambda: "step" in browser.find_element(
            By.ID, "where").text)


def _cut(browser: Any, element: Any) -> bool:
    """Whether ``element`` shows less than its content: cut by its box or by an ellipsis."""
    return bool(browser.execute_script(
        "const e = arguments[0]; return e.scrollWidth > e.clientWidth + 1"
        " || e.scrollHeight > e.clientHeight + 1;", element))


def test_run_uids_and_per_agent_means_read_in_full_at_1280_px(
        cartpole_store: Path, selfplay_store: Path, browser: Any) -> None:
    size = browser.get_window_size()
    browser.set_window_size(1280, 900)
    try:
        assert browser.execute_script("return window.innerWidth") <= 1280
        for store in (cartpole_store, selfplay_store):
            with served(store) as server:
                browser.get(server.url + "/")
                cells = browser.find_elements(By.CSS_SELECTOR, ".row[data-run] > div:nth-child(2)")
                assert cells
                for cell in cells:
                    link = cell.find_element(By.TAG_NAME, "a")
                    uid = link.get_attribute("title")
                    assert link.text.replace("\n", "") == uid and uid.endswith(("-r0", "-r1"))
                    assert not _cut(browser, cell), uid
                    assert cell.find_element(By.XPATH, "..").rect["height"] < 80
                table = browser.find_element(By.ID, "runs")
                assert not browser.execute_script(
                    "return arguments[0].scrollWidth > arguments[0].clientWidth + 1", table)
                if store == selfplay_store:
                    # Its learner's and past's means, each in full, not a total of 0.
                    means = browser.find_element(By.CSS_SELECTOR,
                                                 ".row[data-run] > div:nth-child(7)")
                    assert re.fullmatch(r"learner -?\d+\.\d\d, past -?\d+\.\d\d",
                                        means.text.replace("\n", " ")), means.text
                    assert not _cut(browser, means)
                    title = means.get_attribute("title")
                    assert "mean return (all): learner" in title and "past" in title
    finally:
        browser.set_window_size(size["width"], size["height"])
