"""Suite-wide guards: every subprocess carries a tag, and none may outlive the suite."""

from __future__ import annotations

import os
import time
import uuid

import pykka
import pytest

from tests.processes import TAG_VARIABLE, kill_all, tagged_processes

SESSION_TAG = os.environ.setdefault(TAG_VARIABLE, uuid.uuid4().hex)


def wait_for_no_processes(tag: str, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    left = tagged_processes(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = tagged_processes(tag)
    return left


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_suite():
    yield
    left = wait_for_no_processes(SESSION_TAG)
    kill_all(left)
    assert not left, f"processes outlived the test suite: {left}"


@pytest.fixture(autouse=True)
def no_actor_outlives_a_test():
    yield
    alive = pykka.ActorRegistry.get_all()
    pykka.ActorRegistry.stop_all(timeout=5)
    assert not alive, f"actors outlived the test: {alive}"


@pytest.fixture
def process_tag(monkeypatch):
    """A tag of this test's own: subprocesses started in it inherit it; checked at teardown."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG_VARIABLE, tag)
    yield tag
    left = wait_for_no_processes(tag)
    kill_all(left)
    assert not left, f"processes outlived the test: {left}"
