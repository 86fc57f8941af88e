"""ActorService, PolicyMappingService, MultiOperatorService and the in-process operators.

The error-handling table of the actor lifecycle has one test per row (``test_row_*``).
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium
import pytest

from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.api.operator import (
    ActorDescriptor,
    EpisodeSummary,
    Operator,
    PassiveOperator,
    RandomOperator,
    ScriptedOperator,
    StepSnapshot,
)
from mosaic.operators.api.services import (
    LOG_SERVICE_ACTOR_SEED_ERROR,
    ActorService,
    OperatorService,
    PolicyMappingService,
)
from mosaic.operators.driver.multi_operator import MultiOperatorService

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """An operator that records every call and can be told to fail."""

    def __init__(self, operator_id: str, action: Any = 1, *, fail: str | None = None) -> None:
        self._id = operator_id
        self.action = action
        self.fail = fail
        self.calls: list[tuple[str, Any]] = []

    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        return self._id.title()

    def select_action(self, observation: Any, legal_actions: Any = None) -> Any:
        self.calls.append(("select_action", observation))
        if self.fail == "select_action":
            raise RuntimeError(f"{self._id} cannot choose")
        return self.action

    def reset(self, seed: int | None = None) -> None:
        self.calls.append(("reset", seed))

    def on_step_result(self, observation: Any, action: Any, reward: float, terminated: bool,
                       truncated: bool) -> None:
        self.calls.append(("on_step_result", (observation, action, reward)))

    def seed(self, n: int) -> None:
        self.calls.append(("seed", n))
        if self.fail == "seed":
            raise RuntimeError(f"{self._id} cannot seed")

    def on_step(self, snapshot: StepSnapshot) -> None:
        self.calls.append(("on_step", snapshot.step_index))
        if self.fail == "on_step":
            raise ValueError(f"{self._id} rejects the step")

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.calls.append(("on_episode_end", summary.episode_index))


def snap(step_index: int = 0, observation: Any = "obs", **kwargs: Any) -> StepSnapshot:
    return StepSnapshot(step_index=step_index, observation=observation, **kwargs)


# -- the error-handling table, one test per row --------------------------------------------------


def run_episode(service: ActorService, steps: int) -> list[Any]:
    """The caller's loop from the lifecycle: select, step, notify; an exception aborts it."""
    actions = []
    for index in range(steps):
        actions.append(service.select_action(snap(index)))
        service.notify_step(snap(index + 1, action=actions[-1]))
    return actions


def test_row_select_action_raises_propagates_and_aborts_the_episode() -> None:
    service = ActorService()
    actor = Recorder("a", fail="select_action")
    service.register_actor(actor)
    with pytest.raises(RuntimeError, match="a cannot choose"):
        run_episode(service, 3)
    assert [c for c, _ in actor.calls] == ["select_action"]  # aborted at the first step
    assert service.active_actor_id == "a"  # the service itself is still usable


def test_row_on_step_raises_propagates_and_aborts_the_episode() -> None:
    service = ActorService()
    actor = Recorder("a", fail="on_step")
    service.register_actor(actor)
    with pytest.raises(ValueError, match="a rejects the step"):
        run_episode(service, 3)
    assert [c for c, _ in actor.calls] == ["select_action", "on_step"]


def test_row_seed_raises_is_logged_and_the_broadcast_continues(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = ActorService()
    first, broken, last = Recorder("first"), Recorder("broken", fail="seed"), Recorder("last")
    service.register_actor(first)
    service.register_actor(broken, activate=False)
    service.register_actor(last, activate=False)
    with caplog.at_level(logging.ERROR, logger="mosaic.operators.api.services"):
        service.seed(42)  # does not raise
    assert ("seed", 42) in first.calls
    assert ("seed", 42) in broken.calls
    assert ("seed", 42) in last.calls  # registered after the failing actor: still seeded
    records = [
        r for r in caplog.records if getattr(r, "event", None) == LOG_SERVICE_ACTOR_SEED_ERROR
    ]
    assert len(records) == 1
    assert records[0].actor_id == "broken"
    assert LOG_SERVICE_ACTOR_SEED_ERROR in records[0].getMessage()
    assert records[0].exc_info is not None


def test_row_set_active_actor_with_unknown_id_raises_key_error_immediately() -> None:
    service = ActorService()
    service.register_actor(Recorder("a"))
    with pytest.raises(KeyError, match="nope"):
        service.set_active_actor("nope")
    assert service.active_actor_id == "a"


# -- registration and activation -----------------------------------------------------------------


def test_first_registered_actor_becomes_active() -> None:
    service = ActorService()
    service.register_actor(Recorder("a", action=7))
    assert service.active_actor_id == "a"
    assert service.select_action(snap()) == 7


def test_activate_false_registers_without_activating() -> None:
    service = ActorService()
    service.register_actor(Recorder("a"), activate=False)
    assert service.active_actor_id is None
    assert "a" in service
    with pytest.raises(LookupError):
        service.select_action(snap())
    service.register_actor(Recorder("b", action=3), activate=False)
    service.set_active_actor("b")
    assert service.select_action(snap()) == 3


def test_a_later_default_registration_switches_and_activate_false_does_not() -> None:
    service = ActorService()
    service.register_actor(Recorder("human"))
    service.register_actor(Recorder("worker"), activate=False)  # "don't switch to this actor"
    assert service.active_actor_id == "human"
    service.register_actor(Recorder("llm"))
    assert service.active_actor_id == "llm"


def test_only_the_active_actor_is_asked_and_notified() -> None:
    service = ActorService()
    a, b = Recorder("a", action=1), Recorder("b", action=2)
    service.register_actor(a)
    service.register_actor(b, activate=False)
    assert service.select_action(snap()) == 1
    service.set_active_actor("b")
    assert service.select_action(snap()) == 2
    service.notify_step(snap(1))
    service.notify_episode_end(EpisodeSummary(episode_index=4, total_reward=1.0, steps=1))
    assert ("on_step", 1) in b.calls and ("on_episode_end", 4) in b.calls
    assert [c for c, _ in a.calls] == ["select_action"]


def test_seed_reaches_every_actor_and_skips_those_without_seed() -> None:
    service = ActorService()
    a, b = Recorder("a"), Recorder("b")
    service.register_actor(a)
    service.register_actor(PassiveOperator())  # no seed method: skipped silently
    service.register_actor(b, activate=False)
    service.seed(7)
    assert ("seed", 7) in a.calls and ("seed", 7) in b.calls


def test_none_from_select_action_is_returned_as_the_no_op() -> None:
    service = ActorService()
    service.register_actor(PassiveOperator())
    assert service.select_action(snap()) is None


def test_notify_step_falls_back_to_on_step_result() -> None:
    calls: list[Any] = []

    class NoOnStep(PassiveOperator):
        def on_step_result(self, observation: Any, action: Any, reward: float,
                           terminated: bool, truncated: bool) -> None:
            calls.append((observation, action, reward, terminated, truncated))

    service = ActorService()
    service.register_actor(NoOnStep())
    service.notify_step(snap(3, "o", reward=1.5, terminated=True, action=2))
    assert calls == [("o", 2, 1.5, True, False)]


def test_descriptors_carry_display_metadata() -> None:
    service = OperatorService()
    assert OperatorService is ActorService
    descriptor = service.register_actor(
        Recorder("w"), display_name="Worker", description="d", policy_label="ppo",
        backend_label="cleanrl",
    )
    assert descriptor == ActorDescriptor("w", "Worker", "ppo", "cleanrl", "d")
    assert service.get_descriptor("w") == descriptor
    service.register_actor(Recorder("x"), activate=False)
    assert [d.display_name for d in service.get_descriptors()] == ["Worker", "X"]


def test_duplicate_ids_and_non_operators_are_rejected() -> None:
    service = ActorService()
    service.register_actor(Recorder("a", action=1))
    with pytest.raises(ValueError, match="already registered"):
        service.register_actor(Recorder("a", action=2))
    with pytest.raises(TypeError, match="not an Operator"):
        service.register_actor(object())  # type: ignore[arg-type]
    assert service.select_action(snap()) == 1


# -- policy mapping ------------------------------------------------------------------------------


def test_policy_mapping_activates_the_mapped_actor_then_selects() -> None:
    service = ActorService()
    service.register_actor(Recorder("llm", action="e4"))
    service.register_actor(Recorder("rl", action="e5"), activate=False)
    mapping = PolicyMappingService({"player_0": "llm"})
    mapping.set_mapping("player_1", "rl")
    assert mapping.get_actor_id("player_1") == "rl"
    assert mapping.select_action_for("player_1", snap(agent_id="player_1"), service) == "e5"
    assert service.active_actor_id == "rl"
    assert mapping.select_action_for("player_0", snap(agent_id="player_0"), service) == "e4"
    assert mapping.mappings() == {"player_0": "llm", "player_1": "rl"}


def test_policy_mapping_unknown_agent_or_actor_raises_key_error() -> None:
    service = ActorService()
    service.register_actor(Recorder("a"))
    mapping = PolicyMappingService()
    with pytest.raises(KeyError, match="player_9"):
        mapping.get_actor_id("player_9")
    mapping.set_mapping("player_0", "ghost")
    with pytest.raises(KeyError, match="ghost"):
        mapping.select_action_for("player_0", snap(), service)
    assert service.active_actor_id == "a"


# -- in-process operators ------------------------------------------------------------------------


def test_operators_satisfy_the_protocol() -> None:
    space = gymnasium.spaces.Discrete(4)
    for operator in (RandomOperator(space, 1), PassiveOperator(),
                     ScriptedOperator(lambda obs, legal: 0), Recorder("r")):
        assert isinstance(operator, Operator)
    assert not isinstance(object(), Operator)


def test_random_operator_is_reproducible_from_its_seed() -> None:
    space = gymnasium.spaces.Discrete(6)
    a, b, c = RandomOperator(space, 11), RandomOperator(space, 11), RandomOperator(space, 12)
    run_a = [a.select_action(None) for _ in range(50)]
    run_b = [b.select_action(None) for _ in range(50)]
    run_c = [c.select_action(None) for _ in range(50)]
    assert run_a == run_b != run_c
    assert all(type(x) is int and 0 <= x < 6 for x in run_a)
    a.reset(seed=11)
    assert [a.select_action(None) for _ in range(50)] == run_a
    space.seed(0)  # the operator samples from its own copy of the space
    b.seed(11)
    assert [b.select_action(None) for _ in range(50)] == run_a


def test_random_operator_picks_among_legal_actions() -> None:
    operator = RandomOperator(gymnasium.spaces.Discrete(9), 3)
    picks = {operator.select_action(None, [2, 5]) for _ in range(100)}
    assert picks == {2, 5}


def test_scripted_operator_calls_its_function() -> None:
    operator = ScriptedOperator(lambda obs, legal: obs * 2 if legal is None else legal[-1],
                                operator_id="double")
    assert operator.select_action(4) == 8
    assert operator.select_action(4, [1, 3]) == 3
    assert operator.id == "double"


# -- MultiOperatorService --------------------------------------------------------------------------


class FakeHandle:
    def __init__(self, operator_id: str, log: list[str], *, fail_stop: bool = False) -> None:
        self.operator_id = operator_id
        self.log = log
        self.fail_stop = fail_stop

    def stop(self, timeout: float | None = None) -> int:
        self.log.append(f"stop {self.operator_id}")
        if self.fail_stop:
            raise OSError("cannot stop")
        return 0


class FakeLauncher:
    def __init__(self, *, fail_on: str | None = None, fail_stop: str | None = None) -> None:
        self.log: list[str] = []
        self.fail_on = fail_on
        self.fail_stop = fail_stop

    def launch(self, config: OperatorConfig, run_id: str | None = None) -> FakeHandle:
        if config.operator_id == self.fail_on:
            raise OSError("no such worker")
        self.log.append(f"launch {config.operator_id}")
        return FakeHandle(config.operator_id, self.log,
                          fail_stop=config.operator_id == self.fail_stop)


def config(operator_id: str) -> OperatorConfig:
    return OperatorConfig.single_agent(operator_id, "random", "random_worker", operator_id,
                                       "gymnasium", "CartPole-v1")


def test_multi_operator_service_starts_and_stops_every_worker() -> None:
    launcher = FakeLauncher(fail_stop="b")
    with MultiOperatorService(launcher) as service:
        for name in ("a", "b", "c"):
            service.add_operator(config(name))
        with pytest.raises(ValueError):
            service.add_operator(config("a"))
        assert [c.operator_id for c in service.get_active_operators()] == ["a", "b", "c"]
        handles = service.start_all()
        assert sorted(handles) == ["a", "b", "c"]
        assert service.remove_operator("c") == 0
        assert [c.operator_id for c in service.get_active_operators()] == ["a", "b"]
    # b's stop raised; a was still stopped, and nothing is left running
    assert launcher.log == ["launch a", "launch b", "launch c", "stop c", "stop a", "stop b"]
    assert service.handles == {}


def test_multi_operator_service_failed_start_leaves_nothing_running() -> None:
    launcher = FakeLauncher(fail_on="c")
    service = MultiOperatorService(launcher)
    for name in ("a", "b", "c"):
        service.add_operator(config(name))
    with pytest.raises(OSError, match="no such worker"):
        service.start_all()
    assert launcher.log == ["launch a", "launch b", "stop a", "stop b"]
    assert service.handles == {}


# -- WorkerOperator against a real agent-mode worker ------------------------------------------


def test_worker_operator_drives_an_agent_mode_worker() -> None:
    from mosaic.operators.api.operator import WorkerOperator
    from mosaic.operators.driver.launcher import OperatorLauncher

    config = OperatorConfig.single_agent("agent", "random", "random_worker", "Agent",
                                         "gymnasium", "", settings={"n_actions": 4})
    handle = OperatorLauncher().launch(config)
    try:
        operator = WorkerOperator(handle, timeout=20.0)
        service = ActorService()
        service.register_actor(operator)
        assert isinstance(operator, Operator) and operator.id == "agent"
        service.seed(3)
        first = [service.select_action(snap(i, [0.0, 1.0])) for i in range(20)]
        assert all(action in range(4) for action in first)
        operator.reset(3)
        assert [service.select_action(snap(i, [0.0, 1.0])) for i in range(20)] == first
        assert {operator.select_action([0.0], legal_actions=[1, 3]) for _ in range(20)} <= {1, 3}
    finally:
        handle.stop(timeout=5.0)
    assert not handle.is_running
