"""Fixtures of the store tests: no writer thread outlives a test, and writers are closed."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from mosaic.core.errors import StoreError
from mosaic.store import StoreWriter


@pytest.fixture(autouse=True)
def no_writer_threads_left() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while any(t.name == "mosaic-store-writer" for t in threading.enumerate()):
        if time.monotonic() > deadline:
            pytest.fail("a store writer thread outlived its test")
        time.sleep(0.01)


@pytest.fixture
def writers() -> Iterator[list[StoreWriter]]:
    """Writers registered here are closed after the test even when it fails."""
    started: list[StoreWriter] = []
    yield started
    for writer in started:
        with contextlib.suppress(StoreError):
            writer.close(timeout=5)
