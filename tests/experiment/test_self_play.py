"""The experiment file's ``self_play:``: a self-play agent gets the muscle of the agent it plays,
a NoOpBrain and its pool's settings; a bad entry is reported at its key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import load_experiment
from mosaic.messages import SelfPlayPlan

GAME = """\
uid: selfplay
environments:
  - uid: game
    env: pettingzoo:classic.tictactoe_v3
    policy_mapping: {player_1: learner, player_2: past}
agents:
  - uid: learner
    brain: mosaic.agents.learners:PPOBrain
    muscle: {class: mosaic.agents.learners:PPOMuscle, params: {rollout_steps: 64}}
    params: {hidden_sizes: [8]}
    placement: {brain: thread, muscle: process}
  - uid: past
    self_play: {of: learner, snapshot_every: 10}
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "exp.yml"
    path.write_text(textwrap.dedent(text))
    return load_experiment(path)


def problems(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    return [(p.location, p.message) for p in caught.value.problems]


def test_a_self_play_agent_plays_the_muscle_of_the_agent_it_names(tmp_path: Path) -> None:
    learner, past = load(tmp_path, GAME).run_config(0).agents
    assert past.self_play == SelfPlayPlan("learner", 10, 5, "uniform", 0.5)
    assert past.muscle == learner.muscle
    assert past.muscle.params == {"hidden_sizes": [8], "rollout_steps": 64}
    assert (past.brain.class_path, past.brain_placement, past.muscle_placement) == (
        "mosaic.agents:NoOpBrain", "thread", "process")
    assert learner.self_play is None


def test_the_pool_settings_are_checked(tmp_path: Path) -> None:
    text = GAME.replace("snapshot_every: 10", "snapshot_every: 0, sample: newest, pool_size: 2")
    assert problems(tmp_path, text) == [
        ("agents[1].self_play.snapshot_every", "expected a whole number >= 1 (episodes), got "
                                               "the number 0"),
        ("agents[1].self_play.sample", "expected 'latest', 'uniform' or 'mix', got the text "
                                       "'newest'"),
    ]


@pytest.mark.parametrize(("of", "expected"), [
    ("lerner", "no agent has uid 'lerner'"),
    ("past", "agent 'past' plays snapshots itself"),
])
def test_it_must_name_an_agent_that_learns(tmp_path: Path, of: str, expected: str) -> None:
    text = GAME.replace("self_play: {of: learner", f"self_play: {{of: {of}")
    assert problems(tmp_path, text) == [("agents[1].self_play.of", expected)]


def test_it_takes_its_muscle_from_the_other_agent_and_needs_one_without_self_play(
        tmp_path: Path) -> None:
    text = GAME.replace("  - uid: past\n",
                        "  - uid: past\n    muscle: mosaic.agents:RandomMuscle\n")
    assert problems(tmp_path, text) == [
        ("agents[1].muscle", "a self_play agent takes its muscle from agent 'learner'")]
    text = GAME.replace("    self_play: {of: learner, snapshot_every: 10}\n", "")
    [(location, message)] = problems(tmp_path, text)
    assert location == "agents[1].muscle" and message.startswith("required key is missing")
