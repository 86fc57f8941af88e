"""Tests of mosaic's operator layer; shared helpers for process hygiene live here."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mosaic.operators.handle import OperatorProcessHandle
from mosaic.operators.launcher import OperatorLauncher


def child_processes() -> dict[int, str]:
    """This process's children and their state letter (``Z`` = exited, not reaped)."""
    me = str(os.getpid())
    children: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":\t", 1) for line in (entry / "status").read_text().splitlines()
                if ":\t" in line
            )
        except OSError:
            continue
        if fields.get("PPid", "").strip() == me:
            children[int(entry.name)] = fields.get("State", "?").strip()[:1]
    return children


def kill_leaked_children() -> dict[int, str]:
    """SIGKILL and reap every child still present; returns what was found."""
    found = child_processes()
    for pid, state in found.items():
        if state != "Z":
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return found


# Fixtures shared by the test modules (imported there by name).

PY = sys.executable


def worker(name: str, *args: str) -> list[str]:
    """The argv of built-in worker ``name``."""
    return [PY, "-m", f"workers.{name}", *args]


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Fail a test that leaves a child process behind (and kill it)."""
    yield
    leaked = kill_leaked_children()
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
