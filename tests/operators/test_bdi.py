"""BDI operators: observations become beliefs, a plan library's ``do(A)`` is the action, a step
without one is a counted fallback, and a bad plan library is refused with its file and line;
in process and as the ``bdi`` worker, on MiniGrid made from its id."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import minigrid  # noqa: F401  (registers the MiniGrid environments)
import numpy as np
import pytest
from minigrid.core.actions import Actions
from minigrid.core.constants import COLOR_TO_IDX, DIR_TO_VEC, OBJECT_TO_IDX, STATE_TO_IDX
from minigrid.wrappers import FullyObsWrapper

from mosaic.operators.bdi import (
    MINIGRID_ACTION_NAMES,
    BdiError,
    BdiOperator,
    BdiReasoner,
    PlanLibraryError,
    load_plan_library,
    percepts,
)
from mosaic.operators.bdi._perception import MINIGRID_COLOURS, MINIGRID_OBJECTS, MINIGRID_STATES
from mosaic.operators.driver.handle import OperatorProcessHandle

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
GRIDWORLD = REPO / "examples" / "bdi" / "gridworld.asl"
ROOM = "MiniGrid-Empty-Random-5x5-v0"


def plans(tmp_path: Path, text: str, name: str = "plans.asl") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def play(operator: BdiOperator, env: gym.Env[Any, Any], seed: int) -> tuple[list[int], float]:
    """One episode of ``operator`` on ``env``: its actions and return."""
    observation, _ = env.reset(seed=seed)
    operator.reset(seed)
    actions, total = [], 0.0
    for _ in range(100):
        action = operator.select_action(observation)
        actions.append(action)
        observation, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        if terminated or truncated:
            break
    return actions, total


# -- beliefs ---------------------------------------------------------------------------------


def test_the_encoding_is_minigrids() -> None:
    assert [OBJECT_TO_IDX[name] for name in MINIGRID_OBJECTS] == list(range(11))
    assert [COLOR_TO_IDX[name] for name in MINIGRID_COLOURS] == list(range(6))
    assert [STATE_TO_IDX[name] for name in MINIGRID_STATES] == list(range(3))
    assert [Actions[name].value for name in MINIGRID_ACTION_NAMES] == list(range(7))


def test_minigrids_own_view_becomes_grid_facts_from_where_the_agent_stands() -> None:
    env = gym.make("MiniGrid-Empty-5x5-v0")  # the agent at (1, 1) facing east, the goal at (3, 3)
    try:
        observation, _ = env.reset(seed=0)
    finally:
        env.close()
    found = percepts(observation, 0, [0, 2])
    assert found[:3] == [("step", (0,)), ("legal", (0,)), ("legal", (2,))]
    facts = {(functor, args) for functor, args in found}
    # Facing east, the goal 2 ahead and 2 to the right: column 3 + 2, row 6 - 2 of the view.
    assert ("goal", (5, 4)) in facts
    assert ("pos", (3, 6)) in facts and ("front", (3, 5)) in facts
    assert ("view", ("egocentric",)) in facts
    assert ("cell", (5, 4, "goal", "green", "open")) in facts
    assert ("wall", (2, 6)) in facts  # the room's north wall, on the agent's left
    assert ("direction", (0,)) in facts
    assert ("mission", ("get to the green goal square",)) in facts


def test_a_full_view_places_the_agent_where_it_is() -> None:
    env = FullyObsWrapper(gym.make("MiniGrid-Empty-Random-5x5-v0"))
    try:
        observation, _ = env.reset(seed=4)
        x, y = (int(v) for v in env.unwrapped.agent_pos)
        dx, dy = DIR_TO_VEC[env.unwrapped.agent_dir]
    finally:
        env.close()
    facts = {(functor, args) for functor, args in percepts(observation, 3)}
    assert ("pos", (x, y)) in facts and ("front", (x + int(dx), y + int(dy))) in facts
    assert ("view", ("full",)) in facts and ("goal", (3, 3)) in facts
    assert ("wall", (0, 0)) in facts and ("step", (3,)) in facts


def test_other_observations_become_obs_facts() -> None:
    assert percepts(np.array([0.5, -1.0], dtype=np.float32), 1)[1:] == [
        ("obs", (0, 0.5)), ("obs", (1, -1.0))]
    assert percepts(7, 0)[1:] == [("obs", (7,))]
    assert percepts({"Pole Angle": 0.25, "hand": [[1, 2], [3, 4]], "done": True}, 0)[1:] == [
        ("pole_Angle", (0.25,)), ("hand", (0, 1)), ("hand", (1, 2)), ("hand", (2, 3)),
        ("hand", (3, 4)), ("done", (True,))]


# -- decisions -------------------------------------------------------------------------------


def test_the_example_plan_library_reaches_the_goal_every_episode_and_replays() -> None:
    env = gym.make(ROOM)
    try:
        operator = BdiOperator(str(GRIDWORLD))
        episodes = [play(operator, env, seed) for seed in range(8)]
        again = BdiOperator(str(GRIDWORLD))
        assert [play(again, env, seed) for seed in range(8)] == episodes
    finally:
        env.close()
    assert all(total > 0.9 for _, total in episodes), episodes
    assert len({tuple(actions) for actions, _ in episodes}) > 3  # the rooms differ
    assert operator.reasoner.tally.fallbacks == 0
    assert operator.reasoner.tally.actions == sum(len(actions) for actions, _ in episodes)


def test_percepts_come_and_go_as_jasons_belief_update_says(tmp_path: Path) -> None:
    # +obs(0, V) fires only when the value changes; -obs(0, V) when the old one goes.
    library = load_plan_library(plans(tmp_path, """
        +obs(0, V) : V > 0 <- do(1).
        -obs(0, V) : V > 0 <- do(2).
    """))
    reasoner = BdiReasoner(library)
    reasoner.reset(0)
    decisions = [reasoner.decide([value]) for value in (1, 1, -1, 3)]
    assert [d.action for d in decisions] == [1, None, 2, 1]
    assert decisions[1].reason == "no_action"  # nothing changed: no event, no plan


def test_a_step_without_do_is_a_counted_fallback(tmp_path: Path) -> None:
    library = load_plan_library(plans(tmp_path, "+step(0) <- do(forward).\n"))
    reasoner = BdiReasoner(library, action_names=["left", "forward"], fallback="first-legal")
    reasoner.reset(1)
    first = reasoner.decide([0.0], legal_actions=[1])
    assert (first.action, first.source, first.reason) == (1, "plan", None)
    later = [reasoner.decide([0.0], legal_actions=[1]) for _ in range(3)]
    assert {(d.action, d.source, d.reason) for d in later} == {(1, "fallback", "no_action")}
    assert later[0].account() == {"source": "fallback", "reason": "no_action",
                                  "cycles": later[0].cycles, "plan_failures": 0}
    assert (reasoner.tally.actions, reasoner.tally.fallbacks) == (4, 3)
    assert reasoner.tally.describe() == ("3 of 4 actions were fallbacks (no_action: 3); "
                                         "0 plan failures")

    busy = BdiReasoner(load_plan_library(plans(tmp_path, "!think.\n+!think <- !!think.\n",
                                               "busy.asl")), max_cycles=50)
    busy.reset(0)
    decision = busy.decide(0)
    assert (decision.action, decision.reason, decision.cycles) == (None, "cycle_limit", 50)


def test_a_failed_plan_drops_its_intention_and_is_counted(tmp_path: Path) -> None:
    library = load_plan_library(plans(tmp_path, """
        !start.
        +!start <- ?nowhere(X); do(X).
        +step(N) : N > 0 <- do(3).
    """))
    reasoner = BdiReasoner(library)
    reasoner.reset(0)
    first = reasoner.decide(0)
    assert (first.source, first.plan_failures) == ("fallback", 1)
    assert reasoner.decide(0).action == 3  # the agent goes on with its other plans
    assert reasoner.tally.plan_failures == 1


def test_do_with_a_name_that_names_no_action_says_where(tmp_path: Path) -> None:
    path = plans(tmp_path, "+step(_)\n    <- do(jump).\n")
    reasoner = BdiReasoner(load_plan_library(path))
    reasoner.reset(0)
    observation = {"image": np.zeros((7, 7, 3), dtype=np.uint8), "direction": 0}
    with pytest.raises(BdiError) as caught:
        reasoner.decide(observation)
    assert str(caught.value) == (
        f"plan library {path}, line 2: do(jump): 'jump' names no action; the action names "
        "are left, right, forward, pickup, drop, toggle, done")


@pytest.mark.parametrize(("text", "line", "message"), [
    ("+!a <- do(x)\n+!b <- do(y).\n", 2, "expected term, got '!'"),
    ("!go.\n+!go : pos(X, Y) & <- do(X).\n", 2, "expected term"),
])
def test_a_bad_plan_library_is_refused_with_its_file_and_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, line: int,
        message: str) -> None:
    path = plans(tmp_path, text)
    with pytest.raises(PlanLibraryError) as caught:
        load_plan_library(path)
    assert (caught.value.path, caught.value.line) == (str(path), line)
    assert str(caught.value).startswith(f"plan library {path}, line {line}, column ")
    assert message in str(caught.value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MOSAIC_USER_PATH", str(tmp_path / "beside"))
    with pytest.raises(PlanLibraryError, match=(
            rf"^plan library missing\.asl: no such file in {tmp_path}, {tmp_path}/beside ")):
        load_plan_library("missing.asl")
    (tmp_path / "beside").mkdir()
    (tmp_path / "beside" / "found.asl").write_text("+step(_) <- do(0).\n")
    assert load_plan_library("found.asl").path == str(tmp_path / "beside" / "found.asl")


# -- the worker ------------------------------------------------------------------------------


def worker(path: Path | str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "workers.bdi_worker", "--plan-library", str(path), *flags]


def test_the_worker_plays_the_room_and_accounts_for_each_decision(
        start: Callable[..., OperatorProcessHandle], tmp_path: Path) -> None:
    handle = start(worker(GRIDWORLD, "--env-id", f"minigrid:{ROOM}"))
    ready = handle.reset(seed=5, timeout=30)
    assert ready["reproducible"] is True
    replies = []
    for _ in range(30):
        reply, end = handle.step(timeout=10)
        replies.append(reply)
        if end is not None:
            break
    assert end is not None and end["terminated"] and end["total_reward"] > 0.9
    assert {r["bdi"]["source"] for r in replies} == {"plan"}

    # A plan library that acts at the first step only: every later step is a counted fallback.
    once = start(worker(plans(tmp_path, "+step(0) <- do(forward).\n"), "--fallback", "noop"))
    once.init_agent("agent_0", "gymnasium", ROOM, {"n_actions": 7}, timeout=30)
    observation = {"image": np.zeros((7, 7, 3), dtype=np.uint8).tolist(), "direction": 1}
    accounts = []
    for _ in range(3):
        reply = once.select_action(observation, player_id="agent_0", timeout=10)
        accounts.append((reply["action"], reply["bdi"]["source"], reply["bdi"].get("reason")))
    assert accounts == [(2, "plan", None), (0, "fallback", "no_action"),
                        (0, "fallback", "no_action")]


def test_the_worker_refuses_a_bad_plan_library_with_exit_code_2(tmp_path: Path) -> None:
    path = plans(tmp_path, "+!a <- do(x)\n+!b <- do(y).\n")
    result = subprocess.run(worker(path), capture_output=True, text=True, timeout=30,
                            stdin=subprocess.DEVNULL, cwd=REPO)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (f"bdi_worker could not start: PlanLibraryError: plan library {path}, line 2, "
            "column 2: expected term, got '!'") in result.stderr
    assert result.stdout == ""  # no protocol line before it gave up
