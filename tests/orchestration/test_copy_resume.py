"""Continuing an environment with ``copies:`` (and ``rollouts:``) where a saved run stopped:
each copy's next episode is kept in the position, in the checkpoint and in the relayed
progress, and a continued loop (or rollout worker) numbers each copy's episodes on, with seeds
the saved run never took. No sockets: the step core, the checkpoint file and the rollout
worker's handlers are called directly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from mosaic.core.checkpoints import (
    Checkpoint,
    checkpoint_path,
    read_checkpoint,
    save_state,
    write_checkpoint,
)
from mosaic.core.seeding import episode_seed
from mosaic.experiment import load_experiment
from mosaic.messages import (
    ComponentSpec,
    EnvironmentPosition,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    MuscleSetupRequest,
    ResumePoint,
    RolloutCollectRequest,
    RolloutCollectResponse,
    RolloutRunRequest,
    RolloutStopRequest,
    VectorResetRequest,
)
from mosaic.orchestration.executor import Executor, _resume_point
from mosaic.orchestration.record_relay import _take_progress, snapshot
from mosaic.orchestration.rollout_worker import RolloutWorker
from mosaic.orchestration.rollouts import Rollout, Worker
from mosaic.runtime.component import handle_hosted
from mosaic.stepping.copy_episodes import CopyEpisodes
from mosaic.stepping.episodes import Recording, Schedule
from mosaic.stepping.progress import Progress
from mosaic.store.writer import StoreWriter
from tests.e2e.cli import write_experiment
from tests.stepping.test_episodes import (
    SEED,
    BatchMuscle,
    Script,
    ledger_and_book,
    outcome,
    run,
)

INDEX = 2  # the environment's position in the file, as test_episodes' copies have it


def copies(count: int, episodes: int, first_copy: int = 0) -> tuple[CopyEpisodes, Any]:
    ledger, book = ledger_and_book()
    loop = CopyEpisodes(INDEX, "cartpole", {"agent_0": "agent"}, ledger,
                        Schedule(SEED, episodes), Recording(steps=True, episodes=True),
                        BatchMuscle(), "agent_0", count, True, first_copy)
    return loop, book


def stored(book: Any, loop: CopyEpisodes) -> tuple[set[tuple[int, int]], set[int]]:
    """The (episode, copy) of every step row and episode record, and the seeds recorded."""
    rows = [r for kind, value in book.events if kind == "rows" for r in value]
    rows += loop.ledger.rows
    numbers = {(r[2], r[11]) for r in rows}
    numbers |= {(args[2], args[9]) for args, _ in book.episodes}
    return numbers, {args[8] for args, _ in book.episodes}


def two_copies_stop_apart() -> Script:
    """Copy 1 ends its first episode in the second step, which is the run's last episode:
    copy 0 is one step into its first episode, copy 1 just reset into its second."""
    return Script([
        outcome([0.0, 0.0], [False, False], [True, True], [0.0, 10.0]),
        outcome([1.0, 1.0], [False, False], [False, False], [1.0, 11.0]),
        outcome([1.0, 1.0], [False, True], [False, True], [2.0, 20.0]),
    ])


def test_a_copy_mid_episode_gives_up_its_number_and_one_only_reset_keeps_it() -> None:
    loop, book = copies(2, episodes=1)
    run(loop, two_copies_stop_apart())
    assert loop.episode.tolist() == [0, 1] and loop.step.tolist() == [2, 0]
    # Copy 0's episode 0 has stored steps: the next run takes 1. Copy 1 ended episode 0 and was
    # only reset into episode 1: the next run begins it again.
    assert loop.copy_episodes == (1, 1)
    assert loop.position == (1, 0, 0)
    assert {(0, 0), (0, 1)} == stored(book, loop)[0]
    loop.ledger.report_position()
    assert loop.ledger.progress.copy_episodes == {"cartpole": (1, 1)}
    assert loop.ledger.progress.positions == {"cartpole": (1, 0, 0)}


def test_a_continued_loop_numbers_each_copy_on_with_seeds_the_saved_run_never_took() -> None:
    first, first_book = copies(2, episodes=1)
    run(first, two_copies_stop_apart())
    at = EnvironmentPosition(*cast(tuple[int, int, int], first.position),
                             copy_episodes=first.copy_episodes)

    second, second_book = copies(2, episodes=2)
    second.resume(at)
    environment = Script([
        outcome([0.0, 0.0], [False, False], [True, True], [0.0, 10.0]),
        outcome([1.0, 1.0], [True, True], [True, True], [1.0, 11.0]),
    ])
    run(second, environment)
    reset = environment.requests[0]
    assert isinstance(reset, VectorResetRequest)
    assert reset.seeds.tolist() == [episode_seed(SEED, INDEX, 1, copy) for copy in range(2)]
    # Its own two episodes, numbered on: copy 0's and copy 1's episode 1.
    assert [(args[2], args[9]) for args, _ in second_book.episodes] == [(1, 0), (1, 1)]
    assert second.episodes_done == 2
    numbers, seeds = stored(first_book, first)
    again, new_seeds = stored(second_book, second)
    assert not numbers & again and not seeds & new_seeds
    assert second.copy_episodes == (2, 2)


def test_copies_past_the_total_in_the_last_step_give_up_their_numbers() -> None:
    """Both copies end in the step that ends the run's only episode: the second is neither
    counted nor recorded, but its steps are stored under its number, so it is not taken
    again."""
    loop, book = copies(2, episodes=1)
    run(loop, Script([
        outcome([0.0, 0.0], [False, False], [True, True], [0.0, 0.0]),
        outcome([1.0, 1.0], [True, True], [True, True], [0.0, 0.0]),
    ]))
    assert len(book.episodes) == 1
    assert loop.copy_episodes == (1, 1)


@pytest.mark.parametrize(("at", "expected"), [
    # A rollout worker's slice of the environment's copies.
    (EnvironmentPosition(9, copy_episodes=(4, 5, 6, 9)), [6, 9]),
    # Fewer copies saved than this run has: the others start after every saved number.
    (EnvironmentPosition(5, copy_episodes=(4, 5, 3)), [3, 5]),
    # A position of a loop without copies (or saved before copies kept theirs).
    (EnvironmentPosition(7), [7, 7]),
])
def test_each_copy_takes_its_own_next_episode_from_the_position(
        at: EnvironmentPosition, expected: list[int]) -> None:
    loop, _book = copies(2, episodes=4, first_copy=2)
    loop.resume(at)
    reset = loop.request()
    assert isinstance(reset, VectorResetRequest)
    assert reset.seeds.tolist() == [episode_seed(SEED, INDEX, episode, 2 + copy)
                                    for copy, episode in enumerate(expected)]
    assert loop.copy_episodes == tuple(expected)  # nothing stepped yet: nothing taken


def test_the_copies_positions_round_trip_through_checkpoint_and_relay(tmp_path: Path) -> None:
    path = tmp_path / "agent.npz"
    write_checkpoint(path, Checkpoint(brain={"state/n": np.array(1)}, digest="ab" * 16,
                                      positions={"cartpole": (6, 0, 0), "board": (3, 1, 2)},
                                      copy_episodes={"cartpole": (6, 4, 5)}))
    saved = read_checkpoint(path)
    assert saved.copy_episodes == {"cartpole": (6, 4, 5)}
    assert _resume_point(path) is not None
    assert _resume_point(path).positions == {  # type: ignore[union-attr]
        "cartpole": EnvironmentPosition(6, 0, 0, None, (6, 4, 5)),
        "board": EnvironmentPosition(3, 1, 2)}

    # A file written before copies kept their episodes still loads, without them.
    save_state(tmp_path / "older.npz", {"brain/state/n": np.array(1), "run/digest":
                                        np.array("cd" * 16), "run/board/position":
                                        np.array([3, 0, 0])})
    older = _resume_point(tmp_path / "older.npz")
    assert older is not None and older.positions == {"board": EnvironmentPosition(3)}

    progress = Progress(copy_episodes={"cartpole": (6, 4, 5)})
    relayed = Progress()
    _take_progress(snapshot(progress), relayed)
    assert relayed.copy_episodes == {"cartpole": (6, 4, 5)}
    _take_progress({}, relayed)  # a relay of an older node sends none
    assert relayed.copy_episodes == {}


def test_a_rollouts_position_is_its_workers_copies_in_order() -> None:
    rollout = Rollout(0, cast(Any, None), {"s": "a"}, (), (), 2, Recording())
    rollout.workers = [Worker(f"w{n}", cast(Any, None), "", "thread", 2 * n, 5)
                       for n in range(2)]
    rollout.workers[1].copy_episodes = (3, 4)
    assert rollout.position is None  # worker 0 has not told its own
    rollout.workers[0].copy_episodes = (7, 2)
    assert rollout.copy_episodes == (7, 2, 3, 4)
    assert rollout.position == (7, 0, 0)


def worker_run(episodes: int, first_copy: int, resume: EnvironmentPosition | None,
               ) -> tuple[list[tuple[Any, ...]], tuple[int, ...]]:
    """A rollout worker of two CartPole copies, run to its end: its episode records and its
    copies' next episodes."""
    worker = RolloutWorker("env/rollout-1")
    try:
        started = cast(EnvironmentStartResponse, handle_hosted(
            worker, EnvironmentStartRequest("env", "gymnasium:CartPole-v1", {}, 1, 2)))
        handle_hosted(worker, MuscleSetupRequest(
            "random", "random@env/rollout-1", "env",
            ComponentSpec("mosaic.agents:RandomMuscle", {}), started.sensors, started.actuators,
            5, "train", "", 10.0, 0, 2, False, None, ""))
        handle_hosted(worker, RolloutRunRequest("env", 1, 3, 0, first_copy, episodes, None,
                                                "random", False, True, (), resume))
        records: list[tuple[Any, ...]] = []
        for _ in range(10_000):
            worker.do_work()
            answer = cast(RolloutCollectResponse,
                          handle_hosted(worker, RolloutCollectRequest(worker.uid)))
            records += [args for kind, args in answer.records if kind == "episode"]
            if answer.finished:
                return records, answer.copy_episodes
        raise AssertionError("the worker did not finish its episodes")
    finally:
        handle_hosted(worker, RolloutStopRequest(worker.uid))
        worker.on_shutdown()


def test_a_rollout_worker_continues_its_copies_from_the_saved_position() -> None:
    first, after = worker_run(6, 2, None)
    assert len(after) == 2 and {args[9] for args in first} == {2, 3}
    # The environment's position: copies 0 and 1 are another worker's.
    at = EnvironmentPosition(max(after), copy_episodes=(50, 50, *after))
    second, _ = worker_run(6, 2, at)
    numbers = {(args[2], args[9]) for args in first}
    again = {(args[2], args[9]) for args in second}
    assert not numbers & again
    assert not {args[8] for args in first} & {args[8] for args in second}
    for copy, next_episode in zip((2, 3), after, strict=True):
        assert min(args[2] for args in second if args[9] == copy) == next_episode


LOADING = """\
    uid: loading
    episodes: 4
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
        copies: 2
    agents:
      - uid: learner
        brain: mosaic.agents.learners:PPOBrain
        muscle: mosaic.agents.learners:PPOMuscle
        load: {phase: main}
"""


def test_a_resumed_run_loads_what_it_loaded_not_its_own_newer_checkpoint(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``load: {phase: main}`` takes the newest run's checkpoint of the phase, but never the
    loading run's own: one killed after saving every N episodes left one, with no position."""
    experiment = load_experiment(write_experiment(tmp_path, LOADING),
                                 store_override=str(tmp_path / "r.sqlite"))
    assert experiment.store_path is not None
    executor = Executor(experiment, StoreWriter(experiment.store_path))
    root = experiment.checkpoints_dir
    earlier = checkpoint_path(root, "loading", "earlier", "main", "learner")
    write_checkpoint(earlier, Checkpoint(brain={"state/n": np.array(1)}, digest="ab" * 16,
                                         positions={"cartpole": (5, 0, 0)},
                                         copy_episodes={"cartpole": (5, 3)}))
    own = checkpoint_path(root, "loading", "base", "main", "learner")
    write_checkpoint(own, Checkpoint(brain={"state/n": np.array(2)}, episodes=20))
    os.utime(earlier, (1, 1))  # the run's own is the newest

    config = executor._with_checkpoints(experiment.run_config(0, 0), "base")
    [paths] = [agent.checkpoints for agent in config.agents]
    assert paths is not None and paths.load == str(earlier) and paths.save == str(own)
    assert config.resume == ResumePoint("ab" * 16, {
        "cartpole": EnvironmentPosition(5, 0, 0, None, (5, 3))})
    assert "keeps no position" not in caplog.text

    # Another run loads the newest, which keeps no position: its copies start over, and the
    # command says so.
    config = executor._with_checkpoints(experiment.run_config(0, 0), "later")
    [paths] = [agent.checkpoints for agent in config.agents]
    assert paths is not None and paths.load == str(own) and config.resume is None
    assert "keeps no position for environment 'cartpole'" in caplog.text
