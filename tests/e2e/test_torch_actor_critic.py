"""End to end through the CLI, TD3 and SAC on PyTorch (TorchTD3Brain, TorchSACBrain with the
NumPy muscles) on Pendulum: threads and processes give one digest and store the learner's
metrics, a run continued from its checkpoint gives the digest of the whole, and without torch
a file naming them is refused naming the extra."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import REPO, query, run_mosaic, write_experiment

pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: {uid}
    seed: 3
    episodes: {episodes}
    max_steps: 40
    placement: {placement}
    environments:
      - uid: pendulum
        env: gymnasium:Pendulum-v1
    agents:
      - uid: learner
        brain: mosaic.agents.learners.torch_actor_critic:Torch{learner}Brain
        muscle: mosaic.agents.learners:{learner}Muscle
        params: {{hidden_sizes: [16], batch_size: 32, learning_starts: 60, random_steps: 40,
                  sync_every: 5}}
        {load}
"""
METRICS = {"TD3": {"critic_loss", "actor_loss", "q_mean"},
           "SAC": {"critic_loss", "actor_loss", "q_mean", "alpha", "entropy"}}


def start(folder: Path, store: Path, learner: str, *, placement: str = "thread",
          episodes: int = 4, load: str = "") -> None:
    """One invocation of the real command, which must succeed."""
    path = write_experiment(folder, EXPERIMENT.format(
        uid="run", episodes=episodes, placement=placement, learner=learner, load=load),
        f"{store.stem}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=240)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("learner", ["TD3", "SAC"])
def test_a_run_in_threads_continued_from_its_checkpoint_gives_the_digest_of_the_whole_in_processes(
        tmp_path: Path, process_tag: str, learner: str) -> None:
    """One digest for threads and processes, and for a run and its continuation, in three runs:
    the whole in processes, then its two halves in threads."""
    whole = tmp_path / "whole.sqlite"
    start(tmp_path, whole, learner, placement="process")
    [(status, steps, whole_digest)] = query(whole, "SELECT status, steps, digest FROM runs")
    assert status == "finished" and steps == 4 * 40
    counts = dict(query(whole, "SELECT name, COUNT(*) FROM metrics GROUP BY name"))
    assert set(counts) == METRICS[learner]
    # Updates from the 60th transition of 160, a report every 5: 20 reports.
    assert counts["critic_loss"] == 20

    split = tmp_path / "split.sqlite"
    # The split falls after the random steps and the first updates: the replay buffer, the
    # networks and the torch Adam moments all travel through the checkpoint.
    start(tmp_path, split, learner, episodes=2)
    start(tmp_path, split, learner, episodes=2, load="load: {phase: main}")
    [(first,), (second,)] = query(split, "SELECT digest FROM runs ORDER BY id")
    assert second == whole_digest and first != whole_digest
    returns = "SELECT total_return FROM episodes ORDER BY run_id, episode"
    assert query(split, returns) == query(whole, returns)


def test_without_torch_the_file_is_refused_naming_the_extra(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "torch"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('torch is not installed here')\n")
    path = write_experiment(tmp_path, EXPERIMENT.format(uid="run", episodes=2,
                                                        placement="thread", learner="SAC",
                                                        load=""))
    result = run_mosaic("experiment-check", str(path), PYTHONPATH=f"{blocked.parent}:{REPO}")
    assert result.returncode == 2, result.stderr
    assert "experiment.yml:11: agents[0].brain: torch_actor_critic (TD3 and SAC on PyTorch) " \
           "needs torch" in result.stderr and "pip install 'mosaic[torch]'" in result.stderr
    assert "Traceback" not in result.stderr
