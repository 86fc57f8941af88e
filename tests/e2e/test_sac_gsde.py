"""End to end through the CLI: SAC with gSDE exploration on MountainCarContinuous gives one
digest in threads and processes (copies, each with its own exploration matrix), and a run
continued from its checkpoint gives the digest of the whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import check_continuation, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: {uid}
    seed: 5
    episodes: {episodes}
    max_steps: 60
    placement: {placement}
    environments:
      - uid: mountaincar
        env: gymnasium:MountainCarContinuous-v0
        {copies}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:SACBrain
        muscle: mosaic.agents.learners:SACMuscle
        params: {{hidden_sizes: [16], batch_size: 32, learning_starts: 40, random_steps: 20,
                  sync_every: 5, learn_alpha: false, initial_alpha: 0.1,
                  exploration: {exploration}, sde_sample_freq: 25, log_std_init: -1.0}}
        {load}
"""


def start(folder: Path, name: str, store: Path, *, placement: str = "thread", episodes: int = 6,
          copies: int = 1, load: str = "", exploration: str = "gsde") -> tuple[int, str]:
    """One invocation of the real command: its exit code and stderr."""
    path = write_experiment(folder, EXPERIMENT.format(
        uid=name, episodes=episodes, placement=placement, load=load, exploration=exploration,
        copies=f"copies: {copies}" if copies > 1 else ""), f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=240)
    return result.returncode, result.stderr


def test_threads_and_processes_give_one_digest_with_copies(tmp_path: Path,
                                                           process_tag: str) -> None:
    digests = {}
    for placement in ("thread", "process"):
        store = tmp_path / f"{placement}.sqlite"
        code, stderr = start(tmp_path, placement, store, placement=placement, copies=2)
        assert code == 0, stderr
        [(status, steps, digests[placement])] = query(store,
                                                      "SELECT status, steps, digest FROM runs")
        assert status == "finished" and steps == 6 * 60
        counts = dict(query(store, "SELECT name, COUNT(*) FROM metrics GROUP BY name"))
        assert set(counts) == {"critic_loss", "actor_loss", "q_mean", "alpha", "entropy"}
    assert digests["thread"] == digests["process"]
    # The option reaches the muscle and the brain: Gaussian exploration takes another path.
    gaussian = tmp_path / "gaussian.sqlite"
    code, stderr = start(tmp_path, "thread", gaussian, copies=2, exploration="gaussian")
    assert code == 0, stderr
    [(digest,)] = query(gaussian, "SELECT digest FROM runs")
    assert digest != digests["thread"]


def test_a_run_continued_from_its_checkpoint_gives_the_digest_of_the_whole(
        tmp_path: Path, process_tag: str) -> None:
    # The split falls after the first updates, with log_std learnt and sent to the muscle.
    check_continuation(start, tmp_path, 2)

