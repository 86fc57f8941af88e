"""End to end through the CLI: TD3 with Ornstein-Uhlenbeck noise on MountainCarContinuous gives
one digest in threads and processes (copies, each with its own process), a run continued from
its checkpoint gives the digest of the whole, and a bad noise is refused at the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import check_continuation, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: {uid}
    seed: 4
    episodes: {episodes}
    max_steps: 60
    placement: {placement}
    environments:
      - uid: mountaincar
        env: gymnasium:MountainCarContinuous-v0
        {copies}
        {rollouts}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:TD3Brain
        muscle: mosaic.agents.learners:TD3Muscle
        params: {{hidden_sizes: [16], batch_size: 32, learning_starts: 60, random_steps: 20,
                  sync_every: 5, noise: {noise}, exploration_noise: 0.5}}
        {load}
"""


def start(folder: Path, name: str, store: Path, *, placement: str = "thread", episodes: int = 6,
          copies: int = 1, load: str = "", noise: str = "ornstein-uhlenbeck",
          rollouts: int = 0) -> tuple[int, str]:
    """One invocation of the real command: its exit code and stderr."""
    path = write_experiment(folder, EXPERIMENT.format(
        uid=name, episodes=episodes, placement=placement, load=load, noise=noise,
        copies=f"copies: {copies}" if copies > 1 else "",
        rollouts=f"rollouts: {rollouts}" if rollouts else ""), f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=240)
    return result.returncode, result.stderr


@pytest.mark.parametrize("rollouts", [0, 2])
def test_threads_and_processes_give_one_digest_with_copies(tmp_path: Path, process_tag: str,
                                                           rollouts: int) -> None:
    """With copies, and with copies in rollout workers (each worker's muscle has its own)."""
    digests = {}
    for placement in ("thread", "process"):
        store = tmp_path / f"{placement}.sqlite"
        code, stderr = start(tmp_path, placement, store, placement=placement, copies=2,
                             rollouts=rollouts, episodes=8)
        assert code == 0, stderr
        [(status, steps, digests[placement])] = query(store,
                                                      "SELECT status, steps, digest FROM runs")
        assert status == "finished" and steps == 8 * 60
    assert digests["thread"] == digests["process"]
    # The option reaches the muscle: Gaussian noise takes another trajectory.
    gaussian = tmp_path / "gaussian.sqlite"
    code, stderr = start(tmp_path, "thread", gaussian, copies=2, noise="gaussian",
                         rollouts=rollouts, episodes=8)
    assert code == 0, stderr
    [(digest,)] = query(gaussian, "SELECT digest FROM runs")
    assert digest != digests["thread"]


def test_a_run_continued_from_its_checkpoint_gives_the_digest_of_the_whole(
        tmp_path: Path, process_tag: str) -> None:
    check_continuation(start, tmp_path, 2)


def test_a_bad_noise_is_refused_at_its_key_before_anything_starts(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, EXPERIMENT.format(
        uid="bad", episodes=1, placement="thread", load="", copies="", rollouts="",
        noise="pink"))
    result = run_mosaic("experiment-check", str(path), timeout=100)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert ("experiment.yml:16: agents[0].params.noise: expected 'gaussian' or "
            "'ornstein-uhlenbeck', got the text 'pink'") in result.stderr, result.stderr
