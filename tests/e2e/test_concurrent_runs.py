"""Several mosaic commands at once, as researchers start them in several terminals, beside CPU
hogs: no run fails because the others (or the hogs) keep the CPUs busy, and each still stops at
once on Ctrl-C. The default settings are used.

``benchmarks/concurrent_runs.py`` runs the same for many trials and counts failures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, cartpole, mosaic_command, query, wait_for_steps, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

COMMANDS = 3
HOGS = 4
@pytest.fixture
def cpu_hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Busy loops that keep every CPU of this machine full (each ends by itself in 5 min)."""
    hog = "import time\nend = time.time() + 300\nwhile time.time() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(HOGS)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def start(folder: Path, index: int, episodes: int) -> tuple[subprocess.Popen[str], Path]:
    experiment = write_experiment(folder, cartpole(f"concurrent-{index}", runs=2, episodes=episodes,
                                                   placement="process", seed=index),
                                  f"e{index}.yml")
    store = folder / f"e{index}.sqlite"
    with open(folder / f"e{index}.log", "w") as log:
        proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(experiment), "--store",
                                 str(store), "--quiet"], cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc, store


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_commands_side_by_side_beside_cpu_hogs_all_finish(tmp_path, process_tag, cpu_hogs):
    started = [start(tmp_path, index, 150) for index in range(COMMANDS)]
    procs = [proc for proc, _ in started]
    try:
        codes = [proc.wait(240) for proc in procs]
    finally:
        stop_all(procs)
    logs = [(tmp_path / f"e{index}.log").read_text() for index in range(COMMANDS)]
    assert codes == [0] * COMMANDS, "\n---\n".join(logs)
    for _, store in started:
        statuses = query(store, "SELECT status, COUNT(*) FROM runs GROUP BY status")
        assert statuses == [("finished", 2)]
    assert not any("stopped answering" in log for log in logs), logs


def test_commands_side_by_side_beside_cpu_hogs_stop_at_once_on_ctrl_c(tmp_path, process_tag,
                                                                     cpu_hogs):
    started = [start(tmp_path, index, 100_000) for index in range(COMMANDS)]
    procs = [proc for proc, _ in started]
    try:
        for proc, store in started:
            wait_for_steps(store, proc, 50, timeout=120)
        times = []
        for proc in procs:
            sent = time.monotonic()
            os.kill(proc.pid, signal.SIGINT)
            proc.wait(30)
            times.append(time.monotonic() - sent)
    finally:
        stop_all(procs)
    logs = [(tmp_path / f"e{index}.log").read_text() for index in range(COMMANDS)]
    assert [proc.returncode for proc in procs] == [130] * COMMANDS, "\n---\n".join(logs)
    # Beside four hogs on a shared machine: 2 s of the target, with room for the load.
    assert max(times) < 5.0, times
    for _, store in started:
        assert query(store, "SELECT status FROM runs") == [("cancelled",)]
