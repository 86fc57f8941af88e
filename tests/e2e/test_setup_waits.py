"""A set-up that is slow but working does not fail its run; one that hangs still does, at once.

Through the real ``mosaic`` command with ``timeouts: {setup: 1}``: an environment or brain
that burns CPU for 3 s in its set-up (as importing torch does on a busy machine) runs to the
end; one asleep in its set-up fails the run about 1 s after it got there, naming itself; and a
brain whose import takes 1.5 CPU seconds sets up beside CPU hogs that make that import last
several set-up timeouts. See mosaic.runtime.setup_wait.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.cli import (
    assert_store_consistent,
    finish,
    query,
    run_mosaic,
    start_mosaic,
    wait_for_file,
    write_experiment,
)
from tests.e2e.test_concurrent_runs import cpu_hogs  # noqa: F401 - a fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

EXPERIMENT = """\
    uid: setup-waits
    seed: 7
    episodes: 2
    placement: {placement}
    timeouts: {{setup: 1}}
    environments:
      - uid: cartpole
        env: {env}
        params: {env_params}
    agents:
      - uid: learner
        brain: {{class: {brain}, params: {brain_params}}}
        muscle: tests.fixtures.agents:ExperienceMuscle
"""
#: Seconds from a component's arrival at its hang to the command's end: the set-up timeout
#: (1 s), the reap (the hung process is killed) and room for a loaded machine.
HANG_LIMIT_S = 8.0


def experiment(placement: str = "process", env: str = "gymnasium:CartPole-v1",
               env_params: str = "{}", brain: str = "tests.fixtures.agents:CountingBrain",
               brain_params: str = "{}") -> str:
    return EXPERIMENT.format(placement=placement, env=env, env_params=env_params, brain=brain,
                             brain_params=brain_params)


def assert_completed(tmp_path: Path, text: str, timeout: float = 120.0) -> None:
    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=timeout)
    assert result.returncode == 0, result.stderr
    [(status, error, episodes)] = query(store, "SELECT status, error, episodes FROM runs")
    assert (status, error, episodes) == ("finished", None, 2)
    assert_store_consistent(store)


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_an_environment_busy_in_its_setup_past_the_timeout_runs(tmp_path, process_tag,
                                                                placement):
    assert_completed(tmp_path, experiment(placement, env="tests.fixtures.slow_setup:"
                                          "BusyStartCartPole", env_params="{busy: 3}"))


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_a_brain_busy_in_its_setup_past_the_timeout_runs(tmp_path, process_tag, placement):
    assert_completed(tmp_path, experiment(placement, brain="tests.fixtures.slow_setup:"
                                          "BusySetupBrain", brain_params="{busy: 3}"))


ASLEEP = "{{stall_in: %s, marker: '{marker}', hold: 60}}"


@pytest.mark.parametrize(("kind", "uid", "fields"), [
    ("environment", "cartpole", {"env": "tests.fixtures.stages:StallingCartPole",
                                 "env_params": ASLEEP % "start"}),
    ("brain", "learner", {"brain": "tests.fixtures.stages:StallingBrain",
                          "brain_params": ASLEEP % "setup"}),
])
@pytest.mark.parametrize("placement", ["thread", "process"])
def test_a_component_asleep_in_its_setup_fails_the_run_at_the_timeout_naming_it(
        tmp_path, process_tag, placement, kind, uid, fields):
    marker = tmp_path / "stage.marker"
    params = {key: value.format(marker=marker) if "params" in key else value
              for key, value in fields.items()}
    path = write_experiment(tmp_path, experiment(placement, **params))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_file(marker, proc, timeout=60)
        began = time.monotonic()
        proc.wait(timeout=60)
        elapsed = time.monotonic() - began
    finally:
        stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert elapsed < HANG_LIMIT_S, f"the hang took {elapsed:.1f} s to end the command"
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed"
    # "within 1 s", or, if it was still importing its code when the wait began, "within 2 s:
    # it worked for 1 s, then did nothing for 1 s": either way one timeout after it hung.
    assert f"{kind} {uid!r} did not answer within" in error, error
    assert "did not answer within 1 s" in error or "then did nothing for 1 s" in error, error


def test_a_brain_slow_to_import_beside_cpu_hogs_sets_up(tmp_path, process_tag, cpu_hogs):  # noqa: F811
    # 1.5 CPU seconds of import among four hogs on this machine's CPUs: several set-up
    # timeouts of wall time, all of it spent working or waiting for a CPU.
    assert_completed(tmp_path, experiment("process", brain="tests.fixtures.slow_import:"
                                          "SlowImportBrain"), timeout=170)
