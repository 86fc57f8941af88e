"""Component processes forked from a zygote: children of this process, with what spawn gives."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mosaic.actors.kinds import component_path
from mosaic.cli.processes import PRELOAD
from mosaic.runtime.bootstrap import Bootstrap
from mosaic.runtime.placement import ProcessPlaced
from mosaic.runtime.processes import zygote_client
from mosaic.runtime.processes.adopted import AdoptedProcess
from mosaic.runtime.processes.child import ChildProcess
from mosaic.runtime.processes.zygote_client import Zygote, fork_process
from mosaic.transport import Credentials
from tests.processes import children_of, gone

from .conftest import StdoutLines, kill_if_alive, wait_until_gone

pytestmark = pytest.mark.timeout(90)

TARGET = "tests.runtime.zygote_target"
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture
def zygote(process_tag: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Zygote]:
    """This process's zygote, with the test target preloaded; closed (and checked) at the end."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # as the mosaic command sets it
    monkeypatch.chdir(ROOT)  # the zygote imports the target from here, as python -m would
    opened = zygote_client.start_zygote([TARGET])
    assert opened is not None
    yield opened
    zygote_client.close_zygote()
    assert zygote_client.current_zygote() is None


def supervised(process: AdoptedProcess | subprocess.Popen[bytes],
               name: str = "fork") -> tuple[ChildProcess, StdoutLines]:
    lines = StdoutLines()
    child = ChildProcess(process, name, read_stdout=lines.read,
                         log=logging.getLogger(f"tests.zygote.{name}"),
                         default_level=logging.INFO, keep_lines=10)
    return child, lines


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", TARGET, *args]


def forked(argv: list[str], pass_fds: tuple[int, ...] = ()) -> AdoptedProcess:
    """``argv`` run in a fork of this process's zygote (which must fork it)."""
    process = fork_process(argv, pass_fds=pass_fds)
    assert isinstance(process, AdoptedProcess)
    return process


def run_to_end(process: AdoptedProcess | subprocess.Popen[bytes]) -> tuple[ChildProcess, Any]:
    """Supervise ``process`` until it exits; the child, and what its first line of JSON said."""
    child, lines = supervised(process)
    try:
        seen = json.loads(lines.next())
        assert child.wait(20.0)
    finally:
        child.kill(5.0)
        child.release()
    return child, seen


def test_a_fork_is_this_process_s_child_in_a_session_of_its_own(zygote: Zygote) -> None:
    child, seen = run_to_end(forked(command("exit", "3")))
    assert seen["pid"] == child.pid and seen["ppid"] == os.getpid()
    assert seen["sid"] == child.pid  # it leads a session of its own, as a spawned child does
    assert seen["argv"] == ["exit", "3"] and seen["main"] == "__main__"
    assert child.exit_code == 3 and child.exit_cause() == "exit code 3"


def test_its_command_line_is_its_command_s(zygote: Zygote) -> None:
    child, lines = supervised(forked(command("wait", str(os.getpid()))))
    try:
        lines.next()
        cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes().split(b"\0")
    finally:
        child.kill(5.0)
        child.release()
    assert [arg.decode() for arg in cmdline[:5]] == command("wait", str(os.getpid()))


def test_it_has_the_passed_descriptors_at_their_numbers_and_no_other(zygote: Zygote) -> None:
    read_end, write_end = os.pipe()
    try:
        process = forked(command("write", str(write_end)), pass_fds=(write_end,))
        os.close(write_end)
        child, seen = run_to_end(process)
        assert os.read(read_end, 100) == b"hello"
    finally:
        os.close(read_end)
    assert write_end in seen["fds"]
    assert len(set(seen["fds"]) - {0, 1, 2, write_end}) <= 1  # the listing's own
    assert child.exit_code == 0


def test_a_signal_to_its_group_ends_it_and_its_status_says_so(zygote: Zygote) -> None:
    child, lines = supervised(forked(command("wait", str(os.getpid()))))
    try:
        lines.next()
        assert child.alive()
        child.signal(signal.SIGTERM)
        assert child.wait(20.0)
    finally:
        child.kill(5.0)
        child.release()
    assert child.exit_code == -signal.SIGTERM
    assert child.exit_cause() == "killed by SIGTERM"


def test_sibling_forks_draw_different_random_numbers(zygote: Zygote) -> None:
    seen = []
    for _ in range(2):
        child, lines = supervised(forked(command("exit", "0")))
        try:
            seen.append(json.loads(lines.next()))
            assert child.wait(20.0)
        finally:
            child.kill(5.0)
            child.release()
    assert seen[0]["random"] != seen[1]["random"]
    assert seen[0]["numpy"] != seen[1]["numpy"]


def test_a_command_it_did_not_preload_is_not_forked(zygote: Zygote) -> None:
    assert not zygote.can_run([sys.executable, "-c", "pass"])
    assert fork_process([sys.executable, "-c", "pass"]) is None  # its caller spawns it
    assert zygote.can_run(command("exit", "0"))


def test_when_the_zygote_is_gone_nothing_is_forked_and_the_log_says_why(
        zygote: Zygote, caplog: pytest.LogCaptureFixture) -> None:
    """Its callers then spawn (as test_a_fork_answered_too_late_... shows of placements)."""
    os.kill(zygote.pid, signal.SIGKILL)
    wait_until_gone(zygote.pid, 10.0)
    with caplog.at_level(logging.WARNING, logger="mosaic.runtime.processes.zygote_client"):
        assert fork_process(command("exit", "4")) is None
    assert "component processes start as fresh interpreters" in caplog.text
    assert not zygote.can_run(command("exit", "0"))


def test_a_zygote_with_a_thread_does_not_fork(process_tag: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # NumPy's BLAS then starts a thread
    monkeypatch.chdir(ROOT)
    threaded = Zygote([TARGET])
    try:
        with pytest.raises(zygote_client.ZygoteUnavailable, match="threads after its imports"):
            threaded.fork(command("exit", "0"))
    finally:
        threaded.close()


def test_forks_end_with_this_process_and_so_does_the_zygote(
        process_tag: str, tmp_path: Path) -> None:
    """SIGKILL the parent: the zygote and the forks (which arm their parent-death signal)
    end, and nothing is left."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {ROOT!r})
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        from mosaic.runtime.processes.zygote_client import fork_process, start_zygote
        zygote = start_zygote([{TARGET!r}])
        forks = [fork_process([sys.executable, "-m", {TARGET!r}, "wait", str(os.getpid())])
                 for _ in range(2)]
        print(zygote.pid, *(fork.pid for fork in forks), flush=True)
        for fork in forks:
            fork.stdout.readline()
        print("ready", flush=True)
        import signal
        signal.pause()
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              cwd=ROOT, text=True)
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert parent.stdout.readline().strip() == "ready"
        assert len(pids) == 3 and not any(gone(pid) for pid in pids)
        parent.kill()
        parent.wait(20)
        for pid in pids:
            wait_until_gone(pid, 10.0)
    finally:
        parent.kill()
        parent.wait(20)
        if parent.stdout is not None:
            parent.stdout.close()
        for pid in pids:
            kill_if_alive(pid)


def test_a_fork_answered_too_late_is_replaced_by_a_spawn_that_shares_no_pipe_with_it(
        process_tag: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The zygote forks a component after its answer was given up on: the spawn that replaces
    the fork gets pipes of its own, so it, not the late fork, reads the trust it is sent, and
    the late fork reads the end of its own trust pipe and exits."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.chdir(ROOT)
    earlier = set(children_of(os.getpid()))  # a session's servers, say
    zygote = zygote_client.start_zygote(PRELOAD)
    assert zygote is not None
    earlier.add(zygote.pid)
    endpoints = {uid: f"ipc://{tmp_path}/{uid}" for uid in ("prompt", "late", "after")}
    trust = Bootstrap(Credentials.fresh(), None)
    started: list[ProcessPlaced] = []

    def place(uid: str) -> ProcessPlaced:
        placed = ProcessPlaced("environment", uid, endpoints[uid],
                               component=component_path("environment"), trust=trust)
        started.append(placed)
        return placed.wait_bound(30.0)

    try:
        assert isinstance(place("prompt")._child.process, AdoptedProcess)  # the zygote is up
        monkeypatch.setattr(zygote_client, "FORK_REPLY_S", 1e-6)  # it cannot answer in time
        late = place("late")
        assert isinstance(late._child.process, subprocess.Popen)
        assert late.alive()
        # A late fork, if the zygote made one before it was killed, is an orphan of this
        # process: its one new child that no placement started. It ends by itself (a zombie,
        # then, which is reaped here).
        late_forks = set(children_of(os.getpid())) - earlier - {p.pid for p in started}
        deadline = time.monotonic() + 20.0
        while running := [pid for pid in late_forks if not gone(pid)]:
            assert time.monotonic() < deadline, f"the late fork {running} still runs"
            time.sleep(0.05)
        for pid in late_forks:
            os.waitpid(pid, 0)
        # The zygote is given up: every later start is a spawn too, and serves.
        after = place("after")
        assert isinstance(after._child.process, subprocess.Popen) and after.alive()
    finally:
        for placed in started:
            placed.stop(5.0)
        zygote_client.close_zygote()
