"""The real ``mosaic`` command refuses a built-in learner's bad params when it loads the file.

A misspelt key (with a did-you-mean) or a value out of range, in the agent's ``params`` or in the
brain's own, is exit 2 from ``experiment-check`` and ``experiment-start`` alike: one line naming
the file, the line and the key path, the problem said once, no traceback, nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import cartpole, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TABULAR_Q = """\
    uid: lake
    episodes: 3
    environments:
      - uid: lake
        env: gymnasium:FrozenLake-v1
        params: {{is_slippery: false}}
    agents:
      - uid: learner
        brain: {brain}
        muscle: mosaic.agents.learners:TabularQMuscle
        params:
          {params}
"""
TABULAR_Q_BRAIN = "mosaic.agents.learners:TabularQBrain"
TYPO = ("unknown key 'learning_rat' (hint: did you mean 'learning_rate'? known keys here: "
        "learning_rate, ")


def tabular_q(params: str = "discount: 0.9", brain: str = TABULAR_Q_BRAIN) -> str:
    return TABULAR_Q.format(params=params, brain=brain)


def policy_gradient(params: str = "{}", brain_params: str = "{}") -> str:
    """CartPole with a policy-gradient agent: ``params`` are the agent's, ``brain_params`` the
    brain's own (flow mappings)."""
    brain = f"{{class: mosaic.agents.learners:PolicyGradientBrain, params: {brain_params}}}"
    return cartpole(uid="pg", muscle="mosaic.agents.learners:PolicyGradientMuscle").replace(
        "muscle:", f"brain: {brain}\n        params: {params}\n        muscle:", 1)


# name -> (file text, the key path of the problem, the text on its line, the problem)
REFUSED = {
    "tabular_q_misspelt": (tabular_q("learning_rat: 0.1"), "agents[0].params.learning_rat",
                           "learning_rat:", TYPO),
    "tabular_q_out_of_range": (
        tabular_q("learning_rate: 7"), "agents[0].params.learning_rate", "learning_rate:",
        "expected a number in (0, 1] (the step size alpha), got the number 7"),
    "policy_gradient_misspelt": (
        policy_gradient("{learning_rat: 0.1}"), "agents[0].params.learning_rat",
        "learning_rat:", TYPO.replace("learning_rate, ", "hidden_sizes, ")),
    "policy_gradient_out_of_range": (
        policy_gradient("{learning_rate: 0}"), "agents[0].params.learning_rate",
        "learning_rate:", "expected a number > 0 (Adam, policy), got the number 0"),
    "tabular_q_brain_misspelt": (
        tabular_q(brain=f"{{class: {TABULAR_Q_BRAIN}, params: {{learning_rat: 0.1}}}}"),
        "agents[0].brain.params.learning_rat", "learning_rat:", TYPO),
    "tabular_q_brain_out_of_range": (
        tabular_q(brain=f"{{class: {TABULAR_Q_BRAIN}, params: {{learning_rate: 7}}}}"),
        "agents[0].brain.params.learning_rate", "learning_rate:",
        "expected a number in (0, 1] (the step size alpha), got the number 7"),
    "policy_gradient_brain_out_of_range": (
        policy_gradient(brain_params="{batch_episodes: 0}"),
        "agents[0].brain.params.batch_episodes", "batch_episodes:",
        "expected a whole number >= 1 (episodes per update), got the number 0"),
}


def line_of(text: str, written: str) -> int:
    """The 1-based line of ``text`` (as written to the file) where ``written`` is."""
    lines = [number for number, line in enumerate(text.splitlines(), 1) if written in line]
    assert len(lines) == 1, (written, text)
    return lines[0]


@pytest.mark.parametrize("command", ["experiment-check", "experiment-start"])
@pytest.mark.parametrize("name", REFUSED)
def test_a_bad_learner_param_is_exit_2_naming_the_file_line_and_key(
        tmp_path: Path, command: str, name: str) -> None:
    text, location, written, problem = REFUSED[name]
    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    args = (command, str(path)) + (("--store", str(store)) if command == "experiment-start"
                                   else ())
    done = run_mosaic(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    line = line_of(path.read_text(), written)
    [said] = done.stderr.splitlines()
    assert said.startswith(f"error: {path}:{line}: {location}: {problem}"), said
    assert done.stderr.count(problem) == 1
    assert "Traceback" not in done.stderr
    assert not store.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment.yml"]


def test_the_same_files_with_good_params_are_ok(tmp_path: Path) -> None:
    for name, text in (
            ("tabular_q", tabular_q("{learning_rate: 0.5, epsilon_decay_episodes: 10, "
                                    "update_every: 1}", brain=f"{{class: {TABULAR_Q_BRAIN}, "
                                    "params: {discount: 0.9}}")),
            ("policy_gradient", policy_gradient("{learning_rate: 0.01, batch_episodes: 2}",
                                                "{hidden_sizes: [16], max_grad_norm: 0}"))):
        path = write_experiment(tmp_path, text, f"{name}.yml")
        done = run_mosaic("experiment-check", str(path), timeout=60)
        assert done.returncode == 0, done.stderr
        assert ": ok: experiment" in done.stdout + done.stderr
