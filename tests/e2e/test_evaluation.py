"""Periodic evaluation (``evaluate_every``, ``evaluate_episodes``) through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import cartpole, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

LEARNER_PARAMS = "params: {hidden_sizes: [8], batch_episodes: 2}"
MUSCLE = f"{{class: mosaic.agents.learners:PolicyGradientMuscle, {LEARNER_PARAMS}}}"
BRAIN = f"{{class: mosaic.agents.learners:PolicyGradientBrain, {LEARNER_PARAMS}}}"


def _learner(placement: str, **settings: str) -> str:
    """Six training episodes of the policy-gradient learner, which updates every two."""
    text = cartpole(uid="evaluated", episodes=6, placement=placement, muscle=MUSCLE, **settings)
    return text.replace("\n        muscle:", f"\n        brain: {BRAIN}\n        muscle:")


def _start(folder: Path, name: str, text: str) -> Path:
    path = write_experiment(folder, text, f"{name}.yml")
    store = folder / f"{name}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=150)
    assert result.returncode == 0, result.stderr
    return store


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_evaluation_episodes_are_flagged_and_leave_training_as_it_was(tmp_path, process_tag,
                                                                      placement):
    evaluated = _start(tmp_path, "evaluated",
                       _learner(placement, evaluate_every="2", evaluate_episodes="2"))
    plain = _start(tmp_path, "plain", _learner(placement))

    [(status, episodes, steps, digest)] = query(
        evaluated, "SELECT status, episodes, steps, digest FROM runs")
    assert (status, episodes) == ("finished", 6)
    # The training trajectory, and so the run's fingerprint, is the one without evaluation.
    assert query(plain, "SELECT episodes, steps, digest FROM runs") == [(6, steps, digest)]
    sql = ("SELECT episode, steps, total_return, seed FROM episodes WHERE evaluation = {} "
           "ORDER BY id")
    training = query(evaluated, sql.format(0))
    assert len(training) == 6
    assert training == query(plain, sql.format(0))
    # Two greedy episodes after every second training episode, the last one's included; their
    # steps are not the run's.
    evaluations = query(evaluated, sql.format(1))
    assert [episode for episode, *_ in evaluations] == [0, 1, 2, 3, 4, 5]
    assert all(length >= 1 for _, length, _, _ in evaluations)
    assert query(evaluated, "SELECT COUNT(*) FROM steps")[0][0] == steps
    assert query(plain, "SELECT COUNT(*) FROM episodes WHERE evaluation")[0][0] == 0
    seeds = [seed for *_, seed in evaluations]
    assert len(set(seeds)) == 6
    assert not set(seeds) & {seed for *_, seed in training}
    # Each round comes right after the training episode it follows.
    flags = [flag for (flag,) in query(evaluated, "SELECT evaluation FROM episodes ORDER BY id")]
    assert flags == [0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1]

    shown = run_mosaic("runs", "show", "--store", str(evaluated), "evaluated")
    assert shown.returncode == 0, shown.stderr


PHASED = """\
    uid: bad
    episodes: 2
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1{copies}
    agents:
      - uid: random
        muscle: mosaic.agents:RandomMuscle
{top}    phases:
      - name: train{train}
      - name: test
        mode: test{test}
"""


@pytest.mark.parametrize(("copies", "top", "train", "test", "key", "says"), [
    ("", "    evaluate_episodes: 3\n", "", "", "evaluate_episodes",
     "evaluate_episodes needs evaluate_every"),
    ("", "", "\n        evaluate_episodes: 3", "", "phases[0].evaluate_episodes",
     "evaluate_episodes needs evaluate_every"),
    ("", "", "", "\n        evaluate_every: 2", "phases[1].evaluate_every",
     "already acts greedily"),
    ("\n        copies: 2", "    evaluate_every: 2\n", "", "", "evaluate_every",
     "not supported yet with copies"),
    ("", "    evaluate_every: 0\n", "", "", "evaluate_every", ""),
])
def test_bad_evaluation_keys_exit_2_naming_the_key(tmp_path, copies, top, train, test, key,
                                                  says):
    path = write_experiment(tmp_path, PHASED.format(copies=copies, top=top, train=train,
                                                    test=test))
    result = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 2, result.stderr
    assert key in result.stderr and says in result.stderr
    assert "experiment.yml" in result.stderr


def test_a_test_phase_ignores_an_inherited_evaluate_every(tmp_path, process_tag):
    text = PHASED.format(copies="", top="    evaluate_every: 1\n    evaluate_episodes: 1\n",
                         train="", test="")
    store = _start(tmp_path, "phased", text)
    rows = query(store, "SELECT r.uid, COUNT(e.id), SUM(e.evaluation) FROM runs r "
                 "JOIN episodes e ON e.run_id = r.id GROUP BY r.id ORDER BY r.id")
    assert [(uid.rsplit("-", 1)[1], count, flagged) for uid, count, flagged in rows] == [
        ("train", 4, 2), ("test", 2, 0)]
