"""Runs brought up, stepped and shut down in the test's own process, in every placement.

Each test takes the ``placement`` fixture (see conftest.py): it runs once with every component in
a thread and once with each in a process of its own, and the same assertions hold in both. The
orchestration (Executor, RunGovernor, SimulationController, conductors) is the real one, over
real ZeroMQ sockets, recording in a real SQLite file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mosaic.conductors.run_context import RunContext
from mosaic.core.errors import RemoteError
from mosaic.messages import ExperimentStartRequest, ExperimentStartResponse, names
from mosaic.orchestration.executor import ProgressCallback
from mosaic.transport import RequestClient
from tests.orchestration.placements import Placement

pytestmark = pytest.mark.timeout(60)

#: The transitions of a run that was set up, but for the last one (to its final state).
UP_TO_STOPPING = [("created", "setting_up"), ("setting_up", "running"), ("running", "stopping")]
#: Holds the step loop at the episodes the ``gate`` fixture names (see tests.fixtures.gates).
GATED = "{condition: tests.fixtures.gates:hold_at_gates}"
#: Episodes of a run that is meant to be ended early: far more than a test waits for.
MANY = 1000


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The folder of the gates of tests.fixtures.gates; the step loop holds after episode 2.

    The gate opens at teardown at the latest, so that a failed test leaves no loop held.
    """
    folder = tmp_path / "gates"
    folder.mkdir()
    monkeypatch.setenv("MOSAIC_TEST_GATE_FOLDER", str(folder))
    monkeypatch.setenv("MOSAIC_TEST_GATE_EPISODES", "2")
    yield folder
    (folder / "open-2").touch()


def at_gate(gate: Path, act: Callable[[RunContext], None]) -> ProgressCallback:
    """A progress callback that calls ``act`` once with the run's context while the step loop
    is held after episode 2 (every component up and idle), then lets the run go on."""
    acted: list[bool] = []

    def on_progress(index: int, ctx: RunContext) -> None:
        if acted or not (gate / "held-2").exists():
            return
        acted.append(True)
        try:
            act(ctx)
        finally:
            (gate / "open-2").touch()

    return on_progress


def test_a_run_goes_through_every_state_and_the_store_records_each(placement: Placement) -> None:
    outcome = placement.run(episodes=3)
    [result] = outcome.results
    assert (result.status, result.error, result.killed) == ("finished", None, ())
    assert outcome.transitions() == [*UP_TO_STOPPING, ("stopping", "finished")]
    detail = outcome.detail()
    assert [t.seq for t in detail.transitions] == [1, 2, 3, 4]
    assert (detail.status, detail.error) == ("finished", None)


def test_the_store_holds_the_steps_and_episodes_the_counters_count(placement: Placement) -> None:
    outcome = placement.run(episodes=5)
    [result] = outcome.results
    assert result.episodes == 5 and result.steps > 5
    detail = outcome.detail()
    assert (detail.run.episodes, detail.run.steps) == (result.episodes, result.steps)
    assert detail.episode_stats.count == result.episodes
    assert detail.step_rows == detail.episode_stats.total_steps == result.steps
    assert detail.mean_return == pytest.approx(result.mean_return)


def test_the_same_seed_gives_the_same_digest_in_every_placement(placement: Placement) -> None:
    threads = placement.run(runs=2, placement="thread")
    outcome = placement.run(runs=2)
    digests = [result.digest for result in outcome.results]
    assert digests == [result.digest for result in threads.results]
    assert digests[0] != digests[1]  # two runs, two seeds, two trajectories
    assert [outcome.detail(index).digest for index in (0, 1)] == digests


BROKEN_PARTS = {
    # part: (what names it in the error, the settings that break it at its 20th step)
    "environment": ("environment 'cartpole'",
                    {"env": "tests.fixtures.envs:RaisingCartPole", "params": "{fail_at: 20}"}),
    "muscle": ("muscle 'random@cartpole'",
               {"muscle": "{class: tests.fixtures.agents:RaisingMuscle, params: {fail_at: 20}}"}),
}


@pytest.mark.parametrize("part", list(BROKEN_PARTS))
def test_a_part_that_raises_fails_the_run_naming_it(placement: Placement, part: str) -> None:
    name, settings = BROKEN_PARTS[part]
    outcome = placement.run(episodes=MANY, **settings)  # nothing left running: see run()
    [result] = outcome.results
    assert result.status == "failed"
    assert name in result.error and "RuntimeError: broken at" in result.error, result.error
    assert outcome.transitions() == [*UP_TO_STOPPING, ("stopping", "failed")]
    detail = outcome.detail()
    assert (detail.status, detail.error) == ("failed", result.error)
    assert 0 < result.steps < 20
    assert detail.step_rows == detail.run.steps == result.steps


def test_cancelling_ends_the_run_cancelled_with_its_steps_stored(placement: Placement,
                                                                  gate: Path) -> None:
    outcome = placement.run(episodes=MANY, termination=GATED,
                            on_progress=at_gate(gate, lambda ctx: ctx.cancelled.set()))
    [result] = outcome.results
    assert (result.status, result.error) == ("cancelled", None)
    assert outcome.transitions() == [*UP_TO_STOPPING, ("stopping", "cancelled")]
    held_at = int((gate / "held-2").read_text())
    assert result.steps >= held_at > 0 and 2 <= result.episodes < MANY
    detail = outcome.detail()
    assert detail.status == "cancelled"
    assert detail.step_rows == detail.run.steps == result.steps
    assert detail.episode_stats.count == detail.run.episodes == result.episodes


def test_a_second_start_is_an_illegal_transition_and_the_run_goes_on(placement: Placement,
                                                                     gate: Path) -> None:
    refused: list[RemoteError] = []

    def start_again(ctx: RunContext) -> None:
        client = RequestClient(ctx.endpoints.inproc(names.RUN_GOVERNOR), peer="run governor",
                               credentials=ctx.credentials)
        try:
            client.request(ExperimentStartRequest(ctx.experiment_uid, ctx.run_uid, 0, ctx.seed,
                                                  ctx.config, ctx.endpoints.inproc("executor")),
                           ExperimentStartResponse, ctx.timeouts.step)
        except RemoteError as error:
            refused.append(error)
        finally:
            client.close()

    outcome = placement.run(episodes=4, termination=GATED, on_progress=at_gate(gate, start_again))
    [error] = refused
    assert "IllegalTransition" in str(error) and "from running to setting_up" in str(error)
    [result] = outcome.results
    assert (result.status, result.episodes) == ("finished", 4)
    assert outcome.transitions() == [*UP_TO_STOPPING, ("stopping", "finished")]


def test_a_reward_threshold_ends_its_phase_early_and_the_next_phase_runs(
        placement: Placement) -> None:
    # Every CartPole step is worth 1: any three episodes reach a mean return of 5.
    outcome = placement.run(episodes=40, termination="{reward_threshold: 5, window: 3}",
                            phases="[{name: train}, {name: test, mode: test, episodes: 2}]")
    assert [(r.phase, r.status, r.episodes) for r in outcome.results] == [
        ("train", "finished", 3), ("test", "finished", 2)]
    assert [outcome.detail(index).episode_stats.count for index in (0, 1)] == [3, 2]
