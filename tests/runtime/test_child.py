"""The parent's side of a child process: its exit, its stderr, its signals and its reap."""

from __future__ import annotations

import logging
import signal
import time

import pytest

from mosaic.runtime.processes.child import RELEASE_READERS_S, describe_exit
from mosaic.runtime.processes.stderr import MAX_LINE_BYTES

from .conftest import StartChild, kill_if_alive, wait_until_gone

pytestmark = pytest.mark.timeout(60)


def test_exits_are_named_by_code_or_by_signal() -> None:
    assert describe_exit(0) == "exit code 0"
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(-signal.SIGTERM) == "killed by SIGTERM"
    assert describe_exit(-200) == "killed by signal 200"


def test_a_child_that_exits_is_described_and_its_stderr_logged_and_kept(
        start_child: StartChild, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tests.child"):
        child, _ = start_child("""
            import sys
            sys.stderr.write("WARNING child: low on patience\\n")
            sys.stderr.write("no level here\\n")
            sys.exit(3)
        """, name="exiter")
        assert child.wait(20.0)
        child.drain_stderr(5.0)
    assert not child.alive() and child.exit_code == 3
    assert child.exit_cause() == "exit code 3"
    assert child.stderr_lines() == ["WARNING child: low on patience", "no level here"]
    logged = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    # The level becomes the record's and is not repeated in the message.
    assert ("tests.child.exiter", logging.WARNING, "child: low on patience") in logged
    assert ("tests.child.exiter", logging.INFO, "no level here") in logged


def test_the_stderr_tail_keeps_the_last_lines_and_cuts_endless_ones(
        start_child: StartChild) -> None:
    child, _ = start_child(f"""
        import sys
        for i in range(50):
            sys.stderr.write(f"line {{i}}\\n")
        sys.stderr.write("x" * {MAX_LINE_BYTES * 2} + "\\n")
    """)
    assert child.wait(20.0)
    child.drain_stderr(5.0)
    kept = child.stderr_lines()
    assert len(kept) == 10  # keep_lines
    assert kept[:7] == [f"line {i}" for i in range(43, 50)]
    assert [len(line) for line in kept[7:]] == [MAX_LINE_BYTES, MAX_LINE_BYTES, 0]


def test_a_killed_child_is_named_by_its_signal(start_child: StartChild) -> None:
    child, lines = start_child("import time\nprint('up', flush=True)\ntime.sleep(60)")
    assert lines.next() == "up"
    assert child.alive() and child.exit_cause() is None
    began = time.monotonic()
    assert child.kill(5.0)
    assert time.monotonic() - began < 4.0
    assert child.exit_code == -signal.SIGKILL
    assert child.exit_cause() == "killed by SIGKILL"
    child.signal(signal.SIGTERM)  # to a child that has exited: nothing, and no error


#: Starts a grandchild that sleeps, in a session of its own if argv[1] says ``own-session``,
#: prints its pid and sleeps. The grandchild inherits the child's stdout and stderr.
STARTS_A_GRANDCHILD = """
    import subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                  start_new_session=sys.argv[1] == "own-session")
    print(grandchild.pid, flush=True)
    time.sleep(60)
"""


def test_a_signal_reaches_what_the_child_started(start_child: StartChild) -> None:
    child, lines = start_child(STARTS_A_GRANDCHILD, "same-session")
    grandchild = int(lines.next())
    try:
        child.signal(signal.SIGTERM)
        assert child.wait(5.0) and child.exit_code == -signal.SIGTERM
        wait_until_gone(grandchild, 5.0)
    finally:
        kill_if_alive(grandchild)


def test_the_reap_is_bounded_when_a_grandchild_holds_the_pipes(start_child: StartChild) -> None:
    # The grandchild has a session of its own (no signal to the child's group reaches it) and
    # holds the child's stdout and stderr: the pipes stay open after the child is gone.
    child, lines = start_child(STARTS_A_GRANDCHILD, "own-session")
    grandchild = int(lines.next())
    try:
        assert child.kill(5.0)
        began = time.monotonic()
        child.release()
        assert time.monotonic() - began < RELEASE_READERS_S + 2.0
        assert child.exit_cause() == "killed by SIGKILL"
    finally:
        kill_if_alive(grandchild)
