"""Suite-wide guards: every subprocess carries a tag, and none may outlive the suite; no run
that the suite's own process hosted leaves its ipc folder behind."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pykka
import pytest

from mosaic.transport.endpoints import IPC_FOLDER_PREFIX
from tests import disks
from tests.e2e import postgres_server
from tests.e2e.postgres_server import Server, ServerError
from tests.processes import TAG_VARIABLE, kill_all, tagged_processes

SESSION_TAG = os.environ.setdefault(TAG_VARIABLE, uuid.uuid4().hex)
#: Set by ``.ci/run``, which installs every extra and server the suite needs: there a skipped test
#: (an ``importorskip`` of a missing extra, say) is a test that did not run, so it fails instead.
#: A ``skipif`` mark states a platform condition in the open (Linux calls, two CPUs) and stays a
#: skip, which ``-ra`` lists.
FAIL_ON_SKIP = os.environ.get("MOSAIC_FAIL_ON_SKIP") == "1"


def _fail_if_skipped(report: pytest.CollectReport | pytest.TestReport) -> None:
    if FAIL_ON_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where MOSAIC_FAIL_ON_SKIP=1 (CI): {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
        collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _fail_if_skipped(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if item.get_closest_marker("skipif") is None:
        _fail_if_skipped(report)
    return report


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


@pytest.fixture(scope="session", autouse=True)
def no_ipc_folder_outlives_the_suite():
    """Runs hosted in this process (the in-process orchestration tests) remove their folders."""
    yield
    left = list(Path(tempfile.gettempdir()).glob(f"{IPC_FOLDER_PREFIX}{os.getpid()}-*"))
    for folder in left:
        shutil.rmtree(folder, ignore_errors=True)
    assert not left, f"ipc folders outlived the test suite: {left}"


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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs for the test (see tests.disks); fails the test, never skips it, where it
    cannot be mounted."""
    try:
        with disks.small_disk(tmp_path / "disk") as folder:
            yield folder
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def spill_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder of the test's processes (TMPDIR), where a spill file goes when the
    store's disk cannot take it."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A PostgreSQL server for the module's tests (see :mod:`tests.e2e.postgres_server`); one
    that cannot be started fails them with the reason, it never skips them."""
    try:
        started = postgres_server.start()
    except ServerError as error:
        pytest.fail(f"cannot start a PostgreSQL server for the tests: {error}", pytrace=False)
    try:
        yield started
    finally:
        postgres_server.stop(started)


@pytest.fixture
def database(server: Server) -> str:
    """A new, empty database on the test server."""
    return server.create_database()
