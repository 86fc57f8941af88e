"""Every built-in learner checks its params with one pydantic model, which its brain and its
muscle both declare (``params_model``): the defaults are the documented ones, a bad value says
the range, an unknown key gets a did-you-mean, and ``setup`` refuses them in the words of the
experiment file's check. Loading a file checks the brain's params as well as the muscle's."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from pydantic import BaseModel, Field

from mosaic.agents import Brain, BrainContext, Muscle, MuscleContext, NoOpBrain, RandomMuscle, Slot
from mosaic.agents.learners import (
    DQNBrain,
    DQNMuscle,
    PolicyGradientBrain,
    PolicyGradientMuscle,
    PPOBrain,
    PPOMuscle,
    TabularQBrain,
    TabularQMuscle,
)
from mosaic.agents.learners.policy_gradient_params import PolicyGradientParams
from mosaic.agents.learners.ppo_params import PPOParams
from mosaic.agents.learners.tabular_q_params import TabularQParams
from mosaic.core.config_problems import StrictModel, validate
from mosaic.core.errors import ConfigError, MosaicError
from mosaic.experiment import load_experiment

pytestmark = pytest.mark.timeout(60)

BOX = spaces.Box(-np.inf, np.inf, (4,), np.float64)


@dataclass(frozen=True)
class Learner:
    """A built-in learner, the spaces it takes, and what its params model should say."""

    brain: type[Brain]
    muscle: type[Muscle]
    observation_space: spaces.Space[Any]
    defaults: dict[str, Any]
    bad: tuple[str, Any, str]  # key, value, the problem's words before "got"
    typo: tuple[str, str]  # a misspelt key and the key it should suggest

    def slots(self) -> dict[str, Slot]:
        return {"agent_0": Slot("agent_0", self.observation_space, spaces.Discrete(2))}

    def set_up_brain(self, params: dict[str, Any]) -> Brain:
        brain = self.brain()
        brain.setup(BrainContext("a", "a", self.slots(), 0, "train", params))
        return brain

    def set_up_muscle(self, params: dict[str, Any]) -> Muscle:
        muscle = self.muscle()
        muscle.setup(MuscleContext("a", "a@env", "env", self.slots(), 0, "train", params))
        return muscle


LEARNERS = {
    "tabular_q": Learner(
        TabularQBrain, TabularQMuscle, spaces.Discrete(4),
        {"learning_rate": 0.1, "discount": 0.99, "update_every": 0, "initial_value": 0.0,
         "epsilon": None, "epsilon_start": 1.0, "epsilon_end": 0.05,
         "epsilon_decay_episodes": 200, "load_checkpoint": None, "save_checkpoint": None,
         "agent_id": "none"},
        ("learning_rate", 7, "expected a number in (0, 1] (the step size alpha)"),
        ("learning_rat", "learning_rate")),
    "policy_gradient": Learner(
        PolicyGradientBrain, PolicyGradientMuscle, BOX,
        {"hidden_sizes": [64, 64], "learning_rate": 0.003, "value_learning_rate": 0.003,
         "value_iterations": 20, "discount": 0.99, "gae_lambda": 1.0, "batch_episodes": 8,
         "entropy_coef": 0.0, "normalize_advantages": True, "max_grad_norm": 1.0,
         "load_checkpoint": None, "save_checkpoint": None, "agent_id": "none"},
        ("batch_episodes", 0, "expected a whole number >= 1 (episodes per update)"),
        ("batch_episode", "batch_episodes")),
    "ppo": Learner(
        PPOBrain, PPOMuscle, BOX,
        {"rollout_steps": 2048, "epochs": 10, "minibatch_size": 64, "clip_range": 0.2,
         "discount": 0.99, "gae_lambda": 0.95, "learning_rate": 3e-4, "hidden_sizes": [64, 64],
         "entropy_coef": 0.0, "value_coef": 0.5, "max_grad_norm": 0.5,
         "normalize_advantages": True, "anneal_steps": 0, "initial_log_std": 0.0,
         "load_checkpoint": None, "save_checkpoint": None, "agent_id": "none"},
        ("gae_lambda", 1.5, "expected a number in [0, 1]"), ("rollout_step", "rollout_steps")),
    "dqn": Learner(
        DQNBrain, DQNMuscle, BOX,
        {"hidden_sizes": (64, 64), "learning_rate": 2.5e-4, "discount": 0.99,
         "buffer_size": 50_000, "batch_size": 128, "learning_starts": 1_000, "train_every": 1,
         "target_update_every": 250, "tau": 0.0, "double_dqn": True, "huber_delta": 1.0,
         "max_grad_norm": 10.0, "sync_every": 10, "epsilon_start": 1.0, "epsilon_end": 0.01,
         "epsilon_decay_steps": 10_000, "load_checkpoint": None, "save_checkpoint": None,
         "agent_id": "none"},
        ("tau", 2, "expected a value <= 1.0"), ("learning_start", "learning_starts")),
}


def model_of(learner: Learner) -> type[BaseModel]:
    model = learner.muscle.params_model()
    assert model is not None
    return model


@pytest.mark.parametrize("learner", LEARNERS.values(), ids=LEARNERS.keys())
def test_the_brain_and_the_muscle_declare_one_model_whose_defaults_are_the_documented_ones(
        learner: Learner) -> None:
    model = model_of(learner)
    assert learner.brain.params_model() is model
    assert model.model_validate({}).model_dump() == learner.defaults
    # Both set up without params.
    learner.set_up_brain({})
    learner.set_up_muscle({})


@pytest.mark.parametrize("learner", LEARNERS.values(), ids=LEARNERS.keys())
def test_a_bad_value_is_refused_saying_what_was_expected(learner: Learner) -> None:
    key, value, expected = learner.bad
    checked, problems = validate(model_of(learner), {key: value}, ("params",))
    assert checked is None
    assert [(p.loc, p.message) for p in problems] == [
        (("params", key), f"{expected}, got the number {value}")]
    for name, set_up in ((learner.brain.__name__, learner.set_up_brain),
                         (learner.muscle.__name__, learner.set_up_muscle)):
        with pytest.raises(MosaicError) as caught:
            set_up({key: value})
        assert str(caught.value) == f"{name}: params.{key}: {expected}, got the number {value}"


@pytest.mark.parametrize("learner", LEARNERS.values(), ids=LEARNERS.keys())
def test_an_unknown_key_is_refused_with_a_did_you_mean(learner: Learner) -> None:
    wrong, right = learner.typo
    _, problems = validate(model_of(learner), {wrong: 1}, ("params",))
    (problem,) = problems
    assert problem.loc == ("params", wrong)
    assert problem.message == f"unknown key '{wrong}'"
    assert problem.hint.startswith(f"did you mean '{right}'?")
    for set_up in (learner.set_up_brain, learner.set_up_muscle):
        with pytest.raises(MosaicError, match=f"params.{wrong}: unknown key .*did you mean "
                                              f"'{right}'"):
            set_up({wrong: 1})


def test_tabular_q_takes_a_fixed_epsilon_and_the_types_yaml_gives() -> None:
    learner = LEARNERS["tabular_q"]
    muscle = learner.set_up_muscle({"epsilon": 0.2, "epsilon_start": 0.9})
    assert isinstance(muscle, TabularQMuscle)
    assert (muscle.epsilon_start, muscle.epsilon_end) == (0.2, 0.2)
    brain = learner.set_up_brain({"learning_rate": 1, "initial_value": -1})
    assert isinstance(brain, TabularQBrain)
    assert brain.learning_rate == 1.0 and float(brain.q[0, 0]) == -1.0
    for bad, expected in (({"initial_value": float("inf")}, "a finite number"),
                          ({"epsilon_decay_episodes": 2.5}, "a whole number >= 0"),
                          ({"discount": True}, "a number in [0, 1]")):
        _, problems = validate(TabularQParams, bad)
        assert problems and problems[0].message.startswith(f"expected {expected}")


def test_policy_gradient_refuses_a_hidden_size_below_one_naming_its_index() -> None:
    _, problems = validate(PolicyGradientParams, {"hidden_sizes": [16, 0]}, ("params",))
    assert [(p.loc, p.message) for p in problems] == [
        (("params", "hidden_sizes", 1), "expected a value >= 1, got the number 0")]
    brain = LEARNERS["policy_gradient"].set_up_brain({"hidden_sizes": [], "batch_episodes": 2})
    assert isinstance(brain, PolicyGradientBrain)
    assert brain.batch_episodes == 2 and len(brain.policy.layers) == 1  # no hidden layer


def test_torch_ppo_takes_ppo_params() -> None:
    pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")
    from mosaic.agents.learners.torch_ppo import TorchPPOBrain

    assert TorchPPOBrain.params_model() is PPOParams is PPOMuscle.params_model()


def test_a_brain_or_muscle_without_a_model_takes_any_params() -> None:
    assert Brain.params_model() is None and NoOpBrain.params_model() is None
    assert Muscle.params_model() is None and RandomMuscle.params_model() is None


# -- at load: the brain's params are checked as the muscle's are -------------------------------


class _SpeedParams(StrictModel):
    speed: int = Field(default=1, ge=1, description="a whole number >= 1")
    gear: int = Field(default=1, ge=1, description="a whole number >= 1")


class CheckedBrain(NoOpBrain):
    """A brain whose params are checked at load (named by the file below)."""

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        return _SpeedParams


def _load(tmp_path: Path, agent: str) -> Any:
    path = tmp_path / "experiment.yml"
    path.write_text(textwrap.dedent("""\
        uid: params
        environments:
          - uid: cartpole
            env: gymnasium:CartPole-v1
        agents:
        """) + textwrap.indent(textwrap.dedent(agent), "  "))
    return load_experiment(path)


def _problems(tmp_path: Path, agent: str) -> set[tuple[str, int | None, str]]:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, agent)
    return {(p.location, p.line, p.message) for p in caught.value.problems}


def test_a_brain_params_model_checks_the_merged_params_where_they_are_written(
        tmp_path: Path) -> None:
    agent = """\
        - uid: agent
          params: {speed: 0, gear: 2}
          brain:
            class: tests.agents.test_learner_params:CheckedBrain
            params: {gear: 0}
          muscle: {class: mosaic.agents:RandomMuscle, params: {colour: red}}
        """
    assert _problems(tmp_path, agent) == {
        ("agents[0].params.speed", 7, "expected a whole number >= 1, got the number 0"),
        ("agents[0].brain.params.gear", 10, "expected a whole number >= 1, got the number 0"),
    }
    # The brain's own value wins over the agent's; the muscle's own keys are not the brain's.
    config = _load(tmp_path, agent.replace("speed: 0", "speed: 3").replace("gear: 0", "gear: 4"))
    assert config.run_config(0).agents[0].brain.params == {"speed": 3, "gear": 4}


def test_a_problem_both_learners_find_in_the_agents_params_is_reported_once(
        tmp_path: Path) -> None:
    agent = """\
        - uid: agent
          brain: mosaic.agents.learners:TabularQBrain
          muscle: mosaic.agents.learners:TabularQMuscle
          params: {learning_rat: 0.1, learning_rate: 7}
        """
    problems = _problems(tmp_path, agent)
    assert {(location, line) for location, line, _ in problems} == {
        ("agents[0].params.learning_rat", 9), ("agents[0].params.learning_rate", 9)}
    agent = """\
        - uid: agent
          brain: {class: mosaic.agents.learners:TabularQBrain, params: {discount: 2}}
          muscle: {class: mosaic.agents.learners:TabularQMuscle, params: {epsilon: 2}}
        """
    assert _problems(tmp_path, agent) == {
        ("agents[0].brain.params.discount", 7,
         "expected a number in [0, 1] (gamma), got the number 2"),
        ("agents[0].muscle.params.epsilon", 8, "expected a number in [0, 1] (a fixed exploration "
                                               "rate, in place of the schedule), got the number 2"),
    }
