"""Real child processes for the supervision tests; every one is killed and reaped at teardown."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import IO

import pytest

from mosaic.runtime.processes.child import ChildProcess, spawn
from tests.processes import gone


class StdoutLines:
    """A child's stdout, line by line, for the test to wait on."""

    def __init__(self) -> None:
        self._lines: queue.Queue[str] = queue.Queue()

    def read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self._lines.put(raw.decode().strip())

    def next(self, timeout: float = 20.0) -> str:
        return self._lines.get(timeout=timeout)


StartChild = Callable[..., tuple[ChildProcess, StdoutLines]]


@pytest.fixture
def start_child(process_tag: str) -> Iterator[StartChild]:
    """Start ``python -c CODE`` as a supervised child; it and its pipes end with the test."""
    started: list[ChildProcess] = []

    def start(code: str, *args: str, stdin: bool = False,
              name: str = "child") -> tuple[ChildProcess, StdoutLines]:
        lines = StdoutLines()
        process = spawn([sys.executable, "-c", textwrap.dedent(code), *args], stdin=stdin)
        child = ChildProcess(process, name, read_stdout=lines.read,
                             log=logging.getLogger(f"tests.child.{name}"),
                             default_level=logging.INFO, keep_lines=10)
        started.append(child)
        return child, lines

    yield start
    for child in started:
        child.kill(5.0)
        child.release()


def wait_until_gone(pid: int, timeout: float) -> float:
    """Seconds until ``pid`` had exited; fails the test after ``timeout``."""
    began = time.monotonic()
    while not gone(pid):
        assert time.monotonic() - began < timeout, f"process {pid} still runs"
        time.sleep(0.02)
    return time.monotonic() - began


def kill_if_alive(pid: int | None) -> None:
    if pid is not None and not gone(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
