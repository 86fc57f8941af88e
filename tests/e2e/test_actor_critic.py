"""End to end through the CLI: TD3 and SAC on Pendulum with copies (and in rollout workers)
give one digest in threads and processes and store their metrics, a run continued from its
checkpoint gives the digest of the whole, and a Discrete action space is refused with the
reason, by experiment-check too (at the agent's brain or muscle, NumPy or torch)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.e2e.cli import check_continuation, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: {uid}
    seed: 3
    episodes: {episodes}
    max_steps: 50
    placement: {placement}
    environments:
      - uid: pendulum
        env: {env}
        {copies}
        {rollouts}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:{learner}Brain
        muscle: mosaic.agents.learners:{learner}Muscle
        params: {{hidden_sizes: [16], batch_size: 32, learning_starts: 60, random_steps: 40,
                  sync_every: 5}}
        {load}
"""
METRICS = {"TD3": {"critic_loss", "actor_loss", "q_mean"},
           "SAC": {"critic_loss", "actor_loss", "q_mean", "alpha", "entropy"}}


def start(folder: Path, name: str, store: Path, learner: str, *, placement: str = "thread",
          episodes: int = 8, copies: int = 2, load: str = "",
          env: str = "gymnasium:Pendulum-v1", rollouts: int = 0) -> tuple[int, str]:
    """One invocation of the real command: its exit code and stderr."""
    path = write_experiment(folder, EXPERIMENT.format(
        uid=name, episodes=episodes, placement=placement, env=env, learner=learner, load=load,
        copies=f"copies: {copies}" if copies > 1 else "",
        rollouts=f"rollouts: {rollouts}" if rollouts else ""), f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=240)
    return result.returncode, result.stderr


@pytest.mark.parametrize("rollouts", [0, 2])
@pytest.mark.parametrize("learner", ["TD3", "SAC"])
def test_threads_and_processes_give_one_digest_and_store_the_metrics(
        tmp_path: Path, process_tag: str, learner: str, rollouts: int) -> None:
    """With copies, and with copies in rollout workers (one replay buffer for both)."""
    digests = {}
    for placement in ("thread", "process"):
        store = tmp_path / f"{placement}.sqlite"
        code, stderr = start(tmp_path, placement, store, learner, placement=placement,
                             rollouts=rollouts)
        assert code == 0, stderr
        [(status, steps, digests[placement])] = query(store,
                                                      "SELECT status, steps, digest FROM runs")
        assert status == "finished" and steps == 8 * 50
        counts = dict(query(store, "SELECT name, COUNT(*) FROM metrics GROUP BY name"))
        assert set(counts) == METRICS[learner]
        # Updates from the 60th transition of 400, a report every 5: 68 reports.
        assert counts["critic_loss"] == 68
    assert digests["thread"] == digests["process"]


@pytest.mark.parametrize("learner", ["TD3", "SAC"])
def test_a_run_continued_from_its_checkpoint_gives_the_digest_of_the_whole(
        tmp_path: Path, process_tag: str, learner: str) -> None:
    # The split falls inside the random steps' end and the replay buffer's training.
    check_continuation(functools.partial(start, learner=learner, copies=1), tmp_path, 3)


@pytest.mark.parametrize("learner", ["TD3", "SAC"])
def test_a_discrete_action_space_is_refused_with_the_reason(
        tmp_path: Path, process_tag: str, learner: str) -> None:
    code, stderr = start(tmp_path, "discrete", tmp_path / "d.sqlite", learner,
                         env="gymnasium:CartPole-v1", copies=1)
    assert code != 0
    assert f"{learner}Muscle needs a Box (continuous) action space" in stderr \
        or f"{learner}Brain needs a Box (continuous) action space" in stderr, stderr
    assert "Discrete(2)" in stderr and "use DQNBrain or PPOBrain" in stderr


CHECKED = """\
    uid: checked
    episodes: 2
    environments:
      - uid: env
        env: {env}
    agents:
      - uid: learner
        brain: {brain}
        muscle: mosaic.agents.learners:{muscle}
"""


@pytest.mark.parametrize(("brain", "muscle", "refused"), [
    ("mosaic.agents.learners:TD3Brain", "TD3Muscle", "brain: TD3Brain"),
    ("mosaic.agents.learners.torch_actor_critic:TorchSACBrain", "SACMuscle",
     "brain: TorchSACBrain"),
    ("mosaic.agents:NoOpBrain", "SACMuscle", "muscle: SACMuscle"),
], ids=["td3", "torch-sac", "sac-muscle"])
def test_experiment_check_refuses_a_discrete_action_space_naming_the_key_and_the_reason(
        tmp_path: Path, brain: str, muscle: str, refused: str) -> None:
    if "torch" in brain:
        pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")
    for env in ("gymnasium:CartPole-v1", "gymnasium:Pendulum-v1"):
        path = write_experiment(tmp_path, CHECKED.format(env=env, brain=brain, muscle=muscle))
        result = run_mosaic("experiment-check", str(path), timeout=100)
        assert "Traceback" not in result.stderr
        if env == "gymnasium:Pendulum-v1":  # the same learner in a space it takes
            assert result.returncode == 0, result.stderr
            continue
        assert result.returncode == 2, result.stderr
        line = 8 if refused.startswith("brain") else 9
        assert f"experiment.yml:{line}: agents[0].{refused} needs a Box (continuous) action " \
               f"space; env agent 'agent_0' of gymnasium:CartPole-v1 has Discrete(2) (use " \
               f"DQNBrain or PPOBrain for Discrete actions)" in result.stderr, result.stderr
        assert result.stderr.count("needs a Box") == 1  # the brain's, or else the muscle's
