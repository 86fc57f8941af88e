"""Which checkpoint each phase saves and loads, and where a training phase resumes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaic.core.checkpoints import Checkpoint, checkpoint_path, write_checkpoint
from mosaic.experiment import load_experiment
from mosaic.messages import EnvironmentPosition, ResumePoint
from mosaic.orchestration.executor import Executor
from mosaic.store.writer import StoreWriter
from tests.e2e.cli import write_experiment

PHASED = """\
    uid: paths
    episodes: 2
    environments:
      - uid: lake
        env: gymnasium:FrozenLake-v1
    agents:
      - uid: learner
        brain: mosaic.agents.learners:TabularQBrain
        muscle: mosaic.agents.learners:TabularQMuscle
    phases:
      - name: train
      - name: test
        mode: test
      - name: again
        mode: train
"""


def test_a_test_phase_saves_nothing_and_the_next_phase_loads_the_last_that_saved(
        tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path, PHASED),
                                 store_override=str(tmp_path / "r.sqlite"))
    executor = Executor(experiment, StoreWriter(experiment.store_path))
    root = experiment.checkpoints_dir
    trained = checkpoint_path(root, "paths", "base", "train", "learner")
    write_checkpoint(trained, Checkpoint(brain={"state/q": np.zeros((16, 4))}, digest="ab" * 16,
                                         positions={"lake": (2, 0, 0)}))

    test = executor._with_checkpoints(experiment.run_config(0, 1), "base")
    [paths] = [agent.checkpoints for agent in test.agents]
    assert paths is not None and paths.save is None and paths.load == str(trained)
    assert test.resume is None  # a test phase plays the brain; it does not continue the run

    again = executor._with_checkpoints(experiment.run_config(0, 2), "base")
    [paths] = [agent.checkpoints for agent in again.agents]
    assert paths is not None and paths.load == str(trained)  # the test phase saved none
    assert paths.save == str(checkpoint_path(root, "paths", "base", "again", "learner"))
    assert again.resume == ResumePoint("ab" * 16, {"lake": EnvironmentPosition(2, 0, 0)})
