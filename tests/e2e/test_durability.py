"""SIGKILL of the ``mosaic`` process mid-run: no orphan, and a store that holds what it had.

Nothing of mosaic runs after a SIGKILL: the component processes end by their parent-death
signal, and the store keeps exactly the transactions committed before the kill. The run stays
``running`` in the database; readers report it ``interrupted``, since its process is gone.
Its private ipc folder is removed by the next mosaic command to start.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.cli import (
    cartpole,
    finish,
    query,
    run_mosaic,
    start_mosaic,
    wait_for_steps,
    write_experiment,
)
from tests.processes import component_children, component_pid, tagged_processes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

#: Seconds the component processes may take to end after their parent was killed.
ORPHAN_LIMIT_S = 5.0

#: Every component in a process of its own.
# Every component in a process of its own, the brain too (a NoOpBrain stays in a thread unless
# placed).
LONG_RUN = cartpole(episodes=100_000, placement="process") + \
    "        placement: {brain: process, muscle: process}\n"


def describe_process(pid: int) -> str:
    """``pid``'s command line and the state of each of its threads, to explain an orphan."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        threads = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                   for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return "gone"
    return f"{argv.strip()} (threads: {''.join(threads)})"


def ended(pid: int) -> bool:
    """True once ``pid`` has exited (gone, or a zombie its parent has yet to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_sigkilled_run_leaves_no_orphan_and_a_store_with_every_committed_step(
        tmp_path: Path, process_tag: str, record_property: Callable[[str, object], None]) -> None:
    """SIGKILL mid-run: the children end within 5 s, the database opens, passes its integrity
    check and holds every step committed before the kill, and the run reads as interrupted."""
    path = write_experiment(tmp_path, LONG_RUN)
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=500)
        children = component_children(proc.pid)
        committed = query(store, "SELECT COUNT(*) FROM steps")[0][0]
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(timeout=10)
        while tagged_processes(process_tag) and time.monotonic() - killed < 10:
            time.sleep(0.02)
        orphaned_for = time.monotonic() - killed
    finally:
        finish(proc)
    record_property("seconds_to_no_orphan", round(orphaned_for, 2))
    assert proc.returncode == -signal.SIGKILL
    assert len(children) == 3  # environment, brain and muscle
    left = {pid: describe_process(pid) for pid in tagged_processes(process_tag)}
    assert not left, f"orphans {orphaned_for:.2f} s after the kill: {left}"
    assert orphaned_for < ORPHAN_LIMIT_S, f"the children took {orphaned_for:.2f} s to end"

    with sqlite3.connect(store) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        [(steps,)] = connection.execute("SELECT COUNT(*) FROM steps").fetchall()
        [(uid, status)] = connection.execute("SELECT uid, status FROM runs").fetchall()
        episodes = connection.execute(
            "SELECT episode, COUNT(*), MIN(step), MAX(step) FROM steps GROUP BY episode"
        ).fetchall()
    assert steps >= committed > 0
    assert status == "running"  # as the killed process left it
    # Batches are whole: every episode's stored steps run from 0 without a gap.
    assert all(low == 0 and high == count - 1 for _, count, low, high in episodes), episodes

    shown = run_mosaic("runs", "show", uid, "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "interrupted" in shown.stdout and f"{steps} step rows stored" in shown.stdout
    listed = run_mosaic("runs", "list", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    [line] = [line for line in listed.stdout.splitlines() if uid in line]
    assert "interrupted" in line


@pytest.mark.parametrize(("kind", "uid"), [("environment", "cartpole"), ("brain", "random"),
                                           ("muscle", "random@cartpole")])
def test_a_burst_of_sigterms_ends_a_component_process(tmp_path: Path, process_tag: str,
                                                       kind: str, uid: str) -> None:
    """A component process ends however many SIGTERMs reach it at once.

    A killed ``mosaic`` sends each child one parent-death SIGTERM per thread of its that ends
    (the kernel hands the child on from thread to thread), so several arrive within
    microseconds; a handler that is not safe to re-enter can deadlock on the second one and
    leave the child orphaned. The run then fails naming the component that ended unasked.
    """
    path = write_experiment(tmp_path, LONG_RUN)
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=200)
        pid = component_pid(proc.pid, kind, uid)
        assert pid is not None
        for _ in range(300):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                break
        sent = time.monotonic()
        while not ended(pid) and time.monotonic() - sent < 5:
            time.sleep(0.02)
        left = None if ended(pid) else describe_process(pid)
        proc.wait(timeout=10)
    finally:
        stderr = finish(proc)
    assert left is None, f"still there 5 s after the SIGTERMs: {left}"
    assert proc.returncode == 1, stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed" and f"{kind} {uid!r}" in error, error


def ipc_folders(temp: Path) -> list[Path]:
    """The private ipc folders of mosaic processes in the temporary directory ``temp``."""
    return sorted(temp.glob("mosaic-*"))


def test_no_ipc_folder_outlives_its_run(tmp_path: Path, process_tag: str) -> None:
    """A double Ctrl-C removes its folder on the way out; a SIGKILLed command cannot, so the
    next mosaic command to start removes the folder of a process that is gone."""
    temp = tmp_path / "temp"
    temp.mkdir()
    path = write_experiment(tmp_path, LONG_RUN)
    twice = start_mosaic("experiment-start", str(path), "--store", str(tmp_path / "a.sqlite"),
                         TMPDIR=str(temp))
    killed = start_mosaic("experiment-start", str(path), "--store", str(tmp_path / "b.sqlite"),
                          TMPDIR=str(temp))
    try:
        wait_for_steps(tmp_path / "a.sqlite", twice, minimum=50)
        wait_for_steps(tmp_path / "b.sqlite", killed, minimum=50)
        assert len(ipc_folders(temp)) == 2
        folder_of_killed = next(f for f in ipc_folders(temp) if f"-{killed.pid}-" in f.name)
        os.kill(twice.pid, signal.SIGINT)
        time.sleep(0.05)
        os.kill(twice.pid, signal.SIGINT)
        twice.wait(timeout=20)
        killed.kill()
        killed.wait(timeout=10)
    finally:
        finish(twice)
        finish(killed)
    assert twice.returncode == 130
    assert ipc_folders(temp) == [folder_of_killed]

    short = write_experiment(tmp_path, cartpole(placement="process"), "short.yml")
    result = run_mosaic("experiment-start", str(short), "--store", str(tmp_path / "c.sqlite"),
                        "--quiet", TMPDIR=str(temp))
    assert result.returncode == 0, result.stderr
    assert ipc_folders(temp) == []
