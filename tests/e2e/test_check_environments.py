"""End to end: ``mosaic experiment-check`` builds each environment once, and refuses, with the
key and a hint, what would fail only when a run starts: spaces mosaic's messages cannot carry,
and wrappers with wrong names or parameters."""

from __future__ import annotations

import pytest

from mosaic.core.exit_codes import EXIT_BAD_INPUT
from tests.e2e.cli import run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SPACES = """\
uid: spaces
environments:
  - uid: graph
    env: tests.fixtures.envs:GraphObservations
    policy_mapping: {agent_0: walker}
  - uid: nested
    env: tests.fixtures.envs:SequenceInDict
    policy_mapping: {agent_0: walker}
  - uid: fine
    env: gymnasium:FrozenLake-v1
    policy_mapping: {agent_0: walker}
agents:
  - uid: walker
    muscle: mosaic.agents:RandomMuscle
"""


def test_check_names_each_space_the_codec_cannot_carry(tmp_path):
    path = write_experiment(tmp_path, SPACES)
    result = run_mosaic("experiment-check", str(path))
    assert result.returncode == EXIT_BAD_INPUT, result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    graph = next(line for line in lines if "environments[0].env" in line)
    assert ":4: environments[0].env: the observation space of env agent 'agent_0' (agent " \
           "'walker')" in graph
    assert "Graph(Discrete(3), None) is a gymnasium.spaces.graph.Graph" in graph
    nested = next(line for line in lines if "environments[1].env" in line)
    assert "Sequence(Discrete(5), stack=False) is a gymnasium.spaces.sequence.Sequence" in nested
    assert "at key 'items'" in nested
    assert "environments[2]" not in result.stderr  # FrozenLake's spaces travel


def test_the_same_file_fails_at_run_time_naming_the_space(tmp_path):
    # What experiment-check catches: without it the run starts, and fails in its set-up.
    path = write_experiment(tmp_path, SPACES)
    result = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "s.sqlite"),
                        "--quiet", timeout=100)
    assert result.returncode == 1
    assert "Graph" in result.stderr


WRAPPERS = """\
uid: wrappers
environments:
  - uid: pole
    env: gymnasium:CartPole-v1
    wrappers:
      - TimeLimt: {max_episode_steps: 5}
      - TimeLimit: {max_steps: 5}
      - TimeLimit: {max_episode_steps: fifty}
      - NormalizeObservation: 3
      - collections:OrderedDict
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""


def test_check_names_the_wrapper_key_and_what_is_wrong(tmp_path):
    path = write_experiment(tmp_path, WRAPPERS)
    result = run_mosaic("experiment-check", str(path))
    assert result.returncode == EXIT_BAD_INPUT
    assert "Traceback" not in result.stderr
    assert (":6: environments[0].wrappers[0]: no wrapper named 'TimeLimt' in gymnasium.wrappers "
            "(hint: did you mean 'TimeLimit'?)") in result.stderr
    assert (":7: environments[0].wrappers[1].TimeLimit.max_steps: TimeLimit has no parameter "
            "'max_steps' (hint: did you mean 'max_episode_steps'?") in result.stderr
    assert ":9: environments[0].wrappers[3].NormalizeObservation: expected a mapping of " \
           "parameters, got the number 3" in result.stderr
    assert ":10: environments[0].wrappers[4]: class 'collections:OrderedDict' does not " \
           "subclass gymnasium.core.Wrapper" in result.stderr
    # A value only the wrapper can judge is found when the environment is built, once the
    # names are right.
    fixed = WRAPPERS.replace("TimeLimt: {max_episode_steps: 5}", "NormalizeObservation")
    for bad in ("      - TimeLimit: {max_steps: 5}\n", "      - NormalizeObservation: 3\n",
                "      - collections:OrderedDict\n"):
        fixed = fixed.replace(bad, "")
    path = write_experiment(tmp_path, fixed, "fixed.yml")
    result = run_mosaic("experiment-check", str(path))
    assert result.returncode == EXIT_BAD_INPUT
    assert (":7: environments[0].wrappers[1].TimeLimit: TimeLimit cannot wrap "
            "gymnasium:CartPole-v1: TypeError: Expect the `max_episode_steps` to be an integer"
            ) in result.stderr


def test_wrappers_are_for_gymnasium_environments(tmp_path):
    text = """\
uid: board
environments:
  - uid: game
    env: pettingzoo:classic.tictactoe_v3
    policy_mapping: {player_1: random, player_2: random}
    wrappers: [TimeLimit: {max_episode_steps: 3}]
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""
    result = run_mosaic("experiment-check", str(write_experiment(tmp_path, text)))
    assert result.returncode == EXIT_BAD_INPUT
    assert "environments[0].wrappers: wrappers: takes Gymnasium wrappers" in result.stderr


def test_a_good_file_with_wrappers_and_store_info_passes(tmp_path):
    text = """\
uid: good
environments:
  - uid: lake
    env: gymnasium:FrozenLake-v1
    wrappers: [TimeLimit: {max_episode_steps: 20}]
    store_info: [prob]
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""
    result = run_mosaic("experiment-check", str(write_experiment(tmp_path, text)))
    assert result.returncode == 0, result.stderr
    assert ": ok: experiment 'good'" in result.stdout


LEARNERS = """\
uid: learners
environments:
  - uid: lake
    env: gymnasium:FrozenLake-v1
    policy_mapping: {agent_0: ppo}
  - uid: pole
    env: gymnasium:CartPole-v1
    policy_mapping: {agent_0: dqn}
agents:
  - uid: ppo
    brain: mosaic.agents.learners:PPOBrain
    muscle: mosaic.agents.learners:PPOMuscle
  - uid: dqn
    brain: mosaic.agents.learners:DQNBrain
    muscle: mosaic.agents.learners:DQNMuscle
"""


def test_check_names_a_learner_that_cannot_act_in_its_spaces(tmp_path):
    # PPO on FrozenLake's Discrete observations fails only at set-up without the check; DQN on
    # CartPole is fine. (Slots of one agent that disagree: tests/e2e/test_parameter_sharing.)
    path = write_experiment(tmp_path, LEARNERS)
    result = run_mosaic("experiment-check", str(path))
    assert result.returncode == EXIT_BAD_INPUT, result.stdout
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "agents[" in line]
    assert ":11: agents[0].brain: in gymnasium:FrozenLake-v1: PPOBrain needs a Box observation " \
           "and a Discrete or Box action space; slot 'agent_0' has Discrete(16)" in line
