"""Fixtures for every operator test: no test leaves a child process behind."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.launcher import OperatorLauncher
from tests.processes import kill_and_reap_children


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Fail a test that leaves a child process behind (and kill it)."""
    yield
    leaked = kill_and_reap_children()
    assert not leaked, f"processes outlived the test: {leaked}"


@pytest.fixture
def start() -> Iterator[Callable[..., OperatorProcessHandle]]:
    """Start an argv as a worker; every handle is stopped at teardown, also when the test fails."""
    handles: list[OperatorProcessHandle] = []
    launcher = OperatorLauncher()

    def launch(argv: list[str], operator_id: str = "w", env: dict[str, str] | None = None
               ) -> OperatorProcessHandle:
        handle = launcher.launch_command(argv, operator_id, env=env)
        handles.append(handle)
        return handle

    yield launch
    for handle in handles:
        handle.stop(timeout=2.0)
