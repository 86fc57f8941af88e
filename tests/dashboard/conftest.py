"""Fixtures of the dashboard tests: a store with real runs, a served dashboard, a browser."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from mosaic.core.errors import StoreError
from mosaic.dashboard import BackgroundServer, Dashboard
from mosaic.store import StoreWriter, open_store
from tests.dashboard.browser import browser_fixture

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cartpole_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the real ``mosaic experiment-start`` of examples/cartpole_two_runs.yml."""
    store = tmp_path_factory.mktemp("dashboard") / "cartpole.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "mosaic", "experiment-start", "examples/cartpole_two_runs.yml",
         "--store", str(store), "--quiet"], cwd=REPO, capture_output=True, text=True,
        timeout=90)
    assert done.returncode == 0, done.stderr
    return store


@pytest.fixture(scope="module")
def selfplay_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the real ``mosaic experiment-start`` of a small self-play experiment: two
    agents, ``learner`` and ``past``, in a zero-sum game."""
    from tests.e2e.cli import selfplay, write_experiment

    folder = tmp_path_factory.mktemp("selfplay")
    path = write_experiment(folder, selfplay())
    store = folder / "selfplay.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "mosaic", "experiment-start", str(path), "--store", str(store),
         "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return store


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from browser_fixture(tmp_path_factory)


@contextlib.contextmanager
def served(store: Path | None, manual: tuple[Path, ...] = (), token: str | None = None,
           ) -> Iterator[BackgroundServer]:
    """The dashboard of ``store`` on a free loopback port, stopped (workers reaped) at exit."""
    opened = open_store(store) if store is not None else None
    with BackgroundServer(Dashboard(opened, manual, token, poll_interval=0.2)) as server:
        yield server


@contextlib.contextmanager
def opened_in_manual_mode(browser: Any, example: Path, tmp_path: Path,
                          urls: Mapping[str, str]) -> Iterator[None]:
    """The evaluation file ``example``, each of its model ``urls`` replaced by its value and
    its telemetry under ``tmp_path``, served in Manual mode and opened in ``browser``."""
    text = example.read_text().replace("telemetry: mosaic-telemetry/",
                                       f"telemetry: {tmp_path}/t/")
    for url, served_at in urls.items():
        assert url in text, url
        text = text.replace(url, served_at)
    path = tmp_path / example.name
    path.write_text(text)
    with served(None, (path,)) as server:
        browser.get(server.url + "/manual/0")
        browser.find_element(By.ID, "open").click()
        yield


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[StoreWriter]:
    """A real store writer on a new SQLite file, closed after the test."""
    started = StoreWriter(tmp_path / "live.sqlite", flush_interval=0.05)
    started.start()
    yield started
    with contextlib.suppress(StoreError):
        started.close(timeout=5)
