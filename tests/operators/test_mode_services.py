"""Script/Manual mode and operator agents go through the operator services, with their semantics.

Script and Manual mode drive their lanes through an evaluation session: each lane is an actor of
an ActorService (first registered is active, the episode seed is broadcast to all) and its
worker runs under a MultiOperatorService. OperatorMuscle maps slots to operators with a
PolicyMappingService and asks them through the ActorService.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from gymnasium import spaces

from mosaic.agents import MuscleContext, Slot
from mosaic.operators import OperatorError, OperatorMuscle
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver.multi_operator import MultiOperatorService
from mosaic.operators.evaluation._session import EvaluationSession
from mosaic.operators.evaluation.schema import TimeoutsSpec

pytestmark = pytest.mark.timeout(60)

TIMEOUTS = TimeoutsSpec(step=20, reset=30, stop=3)


def cartpole(operator_id: str, kind: str) -> OperatorConfig:
    return OperatorConfig.single_agent(operator_id, kind, f"{kind}_worker", operator_id,
                                       "gymnasium", "CartPole-v1", {"seed": 1}, max_steps=5)


@pytest.fixture
def session() -> Iterator[EvaluationSession]:
    made = EvaluationSession([cartpole("first", "random"), cartpole("second", "passive")],
                             TIMEOUTS, 0.5, launcher=None, run_id="services-test")
    try:
        yield made
    finally:
        made.close()


def test_the_session_registers_every_lane_and_the_first_is_active(
    session: EvaluationSession,
) -> None:
    assert session.actors.actor_ids() == ["first", "second"]
    assert session.actors.active_actor_id == "first"
    assert [c.operator_id for c in session.workers.get_active_operators()] == ["first", "second"]
    with pytest.raises(KeyError, match="'third'"):
        session.actors.set_active_actor("third")


def test_reset_all_broadcasts_the_episode_seed_to_every_lane(session: EvaluationSession) -> None:
    session.launch_all()
    assert sorted(session.workers.handles) == ["first", "second"]
    for episode, seed in enumerate([11, 29]):
        playing = session.reset_all(episode, seed)
        assert [lane.operator_id for lane in playing] == ["first", "second"]
        assert [(lane.episode_index, lane.seed) for lane in session.lanes] == [(episode, seed)] * 2
        assert session.step(playing) == 2
        steps = [r for lane in session.lanes for r in lane.drain() if r["kind"] == "step"]
        assert {(r["operator"], r["seed"]) for r in steps} == {("first", seed), ("second", seed)}
    # A lane's actor is a placeholder: its worker chooses, the driver applies nothing.
    assert session.actors.get_active_actor().select_action([0.0] * 4) is None
    session.close()
    assert session.workers.handles == {} and all(lane.handle is None for lane in session.lanes)


def test_a_lane_without_a_broadcast_seed_refuses_to_reset(session: EvaluationSession) -> None:
    session.launch_all()
    with pytest.raises(RuntimeError, match="no seed was broadcast"):
        session.lanes[0].reset(0)


def test_a_worker_that_cannot_start_fails_only_its_operator() -> None:
    ghost = OperatorConfig.single_agent("ghost", "command", "ghost", "ghost", "gymnasium",
                                        "CartPole-v1", command=["/nonexistent/worker"])
    with MultiOperatorService(stop_timeout=3) as workers:
        workers.add_operator(ghost)
        workers.add_operator(cartpole("fine", "passive"))
        with pytest.raises(KeyError, match="'nobody'"):
            workers.start("nobody")
        with pytest.raises(Exception, match="could not start"):
            workers.start("ghost")
        handle = workers.start("fine")
        assert workers.start("fine") is handle  # started once
        assert sorted(workers.handles) == ["fine"]
        assert workers.stop("ghost") is None
        assert workers.stop("fine") is not None and workers.stop("fine") is None


# -- OperatorMuscle: slots mapped to operators -------------------------------------------------


class Fixed:
    """An operator that answers its slot's name and ignores the id it is offered."""

    def __init__(self, operator_id: str, fixed_id: str = "") -> None:
        self._id = fixed_id or operator_id
        self.observations: list[Any] = []

    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        return self._id

    def select_action(self, observation: Any, legal_actions: Any = None) -> Any:
        self.observations.append(observation)
        return None if observation == "pass" else 1

    def reset(self, seed: int | None = None) -> None:
        return None

    def on_step_result(self, *args: Any) -> None:
        return None


def setup_muscle(params: dict[str, Any], slots: tuple[str, ...]) -> OperatorMuscle:
    muscle = OperatorMuscle()
    muscle.setup(MuscleContext(
        agent="duo", muscle="duo@game", environment="game",
        slots={uid: Slot(uid, spaces.Discrete(4), spaces.Discrete(4)) for uid in slots},
        seed=3, params=params))
    return muscle


def test_each_slot_acts_through_its_mapped_operator_and_none_is_the_noop() -> None:
    muscle = setup_muscle({"operator": {"class": f"{__name__}:Fixed"}, "noop_action": 3},
                          ("p0", "p1"))
    try:
        first, second = muscle.operators["p0"], muscle.operators["p1"]
        assert (first.id, second.id) == ("duo.p0", "duo.p1")
        muscle.reset()
        assert muscle.act("p1", "b") == 1
        assert muscle.act("p0", "a") == 1
        assert muscle.act("p1", "pass") == 3  # None from the operator: the no-op action
        assert isinstance(first, Fixed) and isinstance(second, Fixed)
        assert (first.observations, second.observations) == (["a"], ["b", "pass"])
    finally:
        muscle.teardown()


def test_two_slots_whose_operators_share_an_id_fail_at_setup_naming_it() -> None:
    params = {"operator": {"class": f"{__name__}:Fixed", "params": {"fixed_id": "same"}}}
    with pytest.raises(OperatorError) as raised:
        setup_muscle(params, ("p0", "p1"))
    message = str(raised.value)
    assert message.startswith("operator 'same' ")
    assert "already registered" in message and "an id of its own" in message

