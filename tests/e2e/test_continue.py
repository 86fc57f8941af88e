"""Continuing through the real CLI: the same experiment run once, and split over two invocations
(the second loading the first one's checkpoint with ``load:``), gives the same digest and the
same episodes, in threads and in processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mosaic.agents.policies import load_policy
from mosaic.core.checkpoints import read_checkpoint
from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

EXPERIMENT = """\
    uid: continued
    seed: 7
    episodes: {episodes}
    placement: {placement}
    environments:
      - uid: world
        env: {env}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:{learner}Brain
        muscle: mosaic.agents.learners:{learner}Muscle
        params: {params}
        {load}
"""

#: learner -> (env, params, episodes of the first invocation, of the second). The split falls
#: inside what the learner holds between updates: half an epsilon decay; half a batch; a
#: rollout part collected; a replay buffer being trained on.
CASES = {
    "TabularQ": ("gymnasium:FrozenLake-v1",
                 "{epsilon_decay_episodes: 40, update_every: 5}", 25, 30),
    "PolicyGradient": ("gymnasium:CartPole-v1", "{batch_episodes: 4, hidden_sizes: [16]}", 6, 7),
    "PPO": ("gymnasium:CartPole-v1",
            "{rollout_steps: 200, minibatch_size: 50, epochs: 2, hidden_sizes: [16]}", 7, 8),
    "DQN": ("gymnasium:CartPole-v1",
            "{learning_starts: 50, batch_size: 16, hidden_sizes: [16], sync_every: 5, "
            "epsilon_decay_steps: 400}", 8, 6),
}
#: Every learner in threads; the two first in processes too (where the muscle's part of the
#: checkpoint crosses a process boundary, whatever the learner).
PLACED = [(learner, "thread") for learner in CASES] + [
    ("TabularQ", "process"), ("PolicyGradient", "process")]

EPISODES = ("SELECT e.episode, e.steps, e.total_return, e.seed FROM episodes e "
            "JOIN runs r ON r.id = e.run_id WHERE r.uid = ? ORDER BY e.episode")


def run(folder: Path, name: str, store: Path, learner: str, placement: str, episodes: int,
        load: str = "") -> tuple[str, str]:
    """One invocation of the real command; its run's uid and digest."""
    env, params, _, _ = CASES[learner]
    path = write_experiment(folder, EXPERIMENT.format(
        episodes=episodes, placement=placement, env=env, learner=learner, params=params,
        load=load), f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=200)
    assert result.returncode == 0, result.stderr
    [(uid, status, digest)] = query(store, "SELECT uid, status, digest FROM runs "
                                           "ORDER BY id DESC LIMIT 1")
    assert status == "finished"
    return uid, digest


@pytest.mark.parametrize(("learner", "placement"), PLACED)
def test_one_run_and_the_same_work_over_two_invocations_give_the_same_digest(
        tmp_path: Path, process_tag: str, learner: str, placement: str) -> None:
    _, _, first, second = CASES[learner]
    whole = tmp_path / "whole.sqlite"
    whole_uid, whole_digest = run(tmp_path, "whole", whole, learner, placement, first + second)

    split = tmp_path / "split.sqlite"
    first_uid, first_digest = run(tmp_path, "first", split, learner, placement, first)
    second_uid, second_digest = run(tmp_path, "second", split, learner, placement, second,
                                    load="load: {phase: main}")
    assert second_digest == whole_digest
    assert first_digest != whole_digest  # the digest covers the steps: half is not the whole
    # The continuation's episodes are the whole run's last ones: numbered, seeded and played
    # alike.
    episodes = query(whole, EPISODES, whole_uid)
    assert query(split, EPISODES, first_uid) == episodes[:first]
    assert query(split, EPISODES, second_uid) == episodes[first:]


def test_a_phase_checkpoint_is_a_policy_checkpoint_and_a_test_phase_saves_none(
        tmp_path: Path, process_tag: str) -> None:
    text = EXPERIMENT.format(episodes=30, placement="thread", env="gymnasium:FrozenLake-v1",
                             learner="TabularQ", params="{epsilon_decay_episodes: 20}", load="")
    text += "    phases:\n      - name: train\n      - name: test\n        mode: test\n"
    store = tmp_path / "r.sqlite"
    result = run_mosaic("experiment-start", str(write_experiment(tmp_path, text)), "--store",
                        str(store), "--quiet", timeout=200)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "r-checkpoints" / "continued"
    [saved] = folder.glob("*/train/learner.npz")
    assert not list(folder.glob("*/test/*"))
    # The greedy table a learner's load_checkpoint reads, beside the state that load: restores.
    checkpoint = read_checkpoint(saved)
    assert load_policy(saved).kind == "q_table"
    assert (load_policy(saved).q == checkpoint.brain["state/q"]).all()  # type: ignore[union-attr]
    assert set(checkpoint.muscles) == {"learner@world"}
    assert checkpoint.positions == {"world": (30, 0, 0)}

    # It plays as a load_checkpoint in a test run of another file.
    tester = EXPERIMENT.format(episodes=3, placement="thread", env="gymnasium:FrozenLake-v1",
                               learner="TabularQ", params=f"{{load_checkpoint: '{saved}'}}",
                               load="").replace("uid: continued", "uid: tester")
    tester += "    mode: test\n"
    result = run_mosaic("experiment-start", str(write_experiment(tmp_path, tester, "t.yml")),
                        "--store", str(tmp_path / "t.sqlite"), "--quiet", timeout=200)
    assert result.returncode == 0, result.stderr


def test_evaluation_rounds_go_on_where_they_stopped(tmp_path: Path, process_tag: str) -> None:
    def run_evaluated(name: str, store: Path, episodes: int, load: str = "") -> str:
        text = EXPERIMENT.format(episodes=episodes, placement="thread",
                                 env="gymnasium:FrozenLake-v1", learner="TabularQ",
                                 params="{epsilon_decay_episodes: 30}", load=load)
        text += "    evaluate_every: 10\n    evaluate_episodes: 2\n"
        result = run_mosaic("experiment-start", str(write_experiment(tmp_path, text,
                                                                     f"{name}.yml")),
                            "--store", str(store), "--quiet", timeout=200)
        assert result.returncode == 0, result.stderr
        return str(query(store, "SELECT uid FROM runs ORDER BY id DESC LIMIT 1")[0][0])

    rows = ("SELECT e.episode, e.evaluation, e.seed, e.total_return FROM episodes e JOIN runs r "
            "ON r.id = e.run_id WHERE r.uid = ? ORDER BY e.evaluation, e.episode")
    whole, split = tmp_path / "whole.sqlite", tmp_path / "split.sqlite"
    expected = query(whole, rows, run_evaluated("whole", whole, 40))
    first = query(split, rows, run_evaluated("first", split, 20))
    second = query(split, rows, run_evaluated("second", split, 20, "load: {phase: main}"))
    assert len([row for row in expected if row[1]]) == 8  # 4 rounds of 2
    assert sorted(first + second, key=lambda row: (row[1], row[0])) == expected
    assert query(whole, "SELECT digest FROM runs") == query(
        split, "SELECT digest FROM runs ORDER BY id DESC LIMIT 1")
