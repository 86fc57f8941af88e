"""A child's side: it dies with its parent, however that is noticed, and acts once on SIGTERM."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest

from mosaic.core.lifeline import process_exists

from .conftest import StartChild, kill_if_alive, wait_until_gone

pytestmark = pytest.mark.timeout(60)

#: A child that holds a lifeline to its parent and says when its SIGTERM action runs.
#: argv: ``kernel`` (the kernel's parent-death signal) or ``check`` (the parent check alone).
LIFELINE_CHILD = """
    import os, sys, time
    from mosaic.runtime.processes import parent
    if sys.argv[1] == "check":
        parent.arm_parent_death_signal = lambda sig: False  # as where the kernel cannot
    parent.on_first_sigterm(lambda: os._exit(0))
    parent.die_with_parent(check_every=0.1)
    print(os.getpid(), flush=True)
    time.sleep(60)
"""
#: The parent of LIFELINE_CHILD: it reports the child's pid, then waits to be killed.
MIDDLE = f"""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", {textwrap.dedent(LIFELINE_CHILD)!r},
                              sys.argv[1]], stdout=subprocess.PIPE)
    print(child.stdout.readline().decode().strip(), flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("noticed_by", ["kernel", "check"])
def test_a_child_outlives_its_killed_parent_by_a_moment_only(
        start_child: StartChild, noticed_by: str) -> None:
    middle, lines = start_child(MIDDLE, noticed_by)
    orphan = int(lines.next())
    try:
        assert middle.kill(5.0)  # SIGKILL: the parent can do nothing for its child
        assert wait_until_gone(orphan, 5.0) < 5.0
    finally:
        kill_if_alive(orphan)


def test_a_child_whose_parent_is_already_gone_stops_at_once(start_child: StartChild) -> None:
    # Its parent ended before the child could ask the kernel: nobody would ever signal it.
    dead = _pid_of_no_process()
    for code in (f"parent.die_with_parent(parent_pid={dead})",
                 f"parent.die_with_parent(launcher_pid={dead})"):
        child, _ = start_child(f"""
            import os, sys, time
            from mosaic.runtime.processes import parent
            parent.on_first_sigterm(lambda: os._exit(7))
            {code}
            time.sleep(60)
        """)
        assert child.wait(20.0) and child.exit_code == 7, code


def test_a_child_that_keeps_its_parent_keeps_running(start_child: StartChild) -> None:
    child, lines = start_child(LIFELINE_CHILD, "check")
    assert int(lines.next()) == child.pid
    assert not child.wait(0.5)  # five parent checks, and no reason to stop


def test_a_burst_of_sigterms_runs_the_action_once(start_child: StartChild) -> None:
    child, lines = start_child("""
        import time
        from mosaic.runtime.processes.parent import on_first_sigterm
        runs = []
        on_first_sigterm(lambda: runs.append(time.monotonic()))
        print("ready", flush=True)
        while not runs:
            time.sleep(0.01)
        time.sleep(1.0)  # the rest of the burst arrives meanwhile
        print(len(runs), flush=True)
    """)
    assert lines.next() == "ready"
    for _ in range(10):  # apart: signals that wait together would be handled as one
        os.kill(child.pid, signal.SIGTERM)
        time.sleep(0.02)
    assert lines.next() == "1"
    assert child.wait(10.0) and child.exit_code == 0


def _pid_of_no_process() -> int:
    pid = os.getpid() + 100_000
    while process_exists(pid):
        pid += 1
    return pid
