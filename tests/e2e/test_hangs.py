"""A component process that stops answering without exiting fails the run within 5 s."""

from __future__ import annotations

import signal

import pytest

from tests.e2e.cli import (
    assert_store_consistent,
    cartpole,
    query,
    signal_and_time,
    start_mosaic,
    wait_for_steps,
    write_experiment,
)
from tests.processes import component_pid

EVERY_PART_IN_A_PROCESS = cartpole(episodes=100_000, placement="process").replace(
    "muscle: mosaic.agents:RandomMuscle",
    "muscle: tests.fixtures.agents:ExperienceMuscle\n"
    "        brain: tests.fixtures.agents:CountingBrain\n"
    "        placement: {brain: process, muscle: process}",
)


@pytest.mark.parametrize(("kind", "uid"), [("environment", "cartpole"),
                                           ("muscle", "random@cartpole"),
                                           ("brain", "random")])
def test_a_stopped_component_process_fails_the_run_naming_it(tmp_path, process_tag, kind, uid):
    path = write_experiment(tmp_path, EVERY_PART_IN_A_PROCESS)
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=100)
        pid = component_pid(proc.pid, kind, uid)
        assert pid is not None, f"no process for {kind} {uid}"
        # Alive, holding its sockets, answering nothing.
        elapsed = signal_and_time(proc, signal.SIGSTOP, pid=pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, stderr = proc.communicate()
    assert proc.returncode == 1, stderr
    assert elapsed < 5.0, f"the hang took {elapsed:.2f} s to end the run"
    assert "Traceback" not in stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed"
    assert f"{kind} {uid!r}" in error and "stopped answering: no heartbeat" in error, error
    assert_store_consistent(store)
    # process_tag checks that the stopped process was killed, not left behind.
