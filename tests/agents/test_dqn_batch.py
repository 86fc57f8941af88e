"""DQN over copies: each copy's transition reaches the replay buffer as on one environment (its
own next observation, the final one where it ended, terminated apart from truncated, none for a
copy that did not act), and updates, target copies, weights sent and epsilon keep the pace per
env step that one environment gives them; in a run with copies, every transition the brain gets
is one that CartPole's dynamics make."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv

import mosaic
from mosaic.agents import BrainContext, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.learners import DQNBrain, DQNMuscle
from mosaic.messages.codec import pack, unpack
from tests.agents.vector_loop import SLOT

pytestmark = pytest.mark.timeout(60)

SMALL: dict[str, Any] = {"hidden_sizes": [8], "batch_size": 4}


def slots() -> dict[str, Slot]:
    box = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    return {SLOT: Slot(SLOT, box, spaces.Discrete(3))}


def pair(copies: int, **params: Any) -> tuple[DQNMuscle, DQNBrain]:
    """A muscle acting for ``copies`` copies (0: one environment) and its brain."""
    params = {**SMALL, **params}
    muscle, brain = DQNMuscle(), DQNBrain()
    brain.setup(BrainContext("a", "a", slots(), 1, "train", params))
    muscle.setup(MuscleContext("a", "a@env", "env", slots(), 2, "train", params,
                               copies=max(copies, 1)))
    return muscle, brain


def learn(muscle: DQNMuscle, brain: DQNBrain, items: Any) -> None:
    """What the muscle actor does with a muscle's experience: through the wire to the brain,
    and its answer back to the muscle."""
    for item in items if isinstance(items, list) else [items]:
        update = brain.learn("a@env", unpack(pack(item)))
        if update is not None:
            muscle.apply_update(unpack(pack(update)))


def obs(*rows: float) -> np.ndarray:
    """Observations of the copies: copy ``c`` at ``rows[c]`` is ``[rows[c], -rows[c]]``."""
    return np.array([[r, -r] for r in rows], dtype=np.float32)


def batch(observations: Any, rewards: Any = (0.0, 0.0), terminated: Any = (False, False),
          truncated: Any = (False, False), acted: Any = (True, True),
          starts: Any = (False, False), finals: dict[int, Any] | None = None) -> Batch:
    return Batch(observations, np.asarray(rewards, np.float64), np.asarray(terminated, bool),
                 np.asarray(truncated, bool), np.asarray(acted, bool), np.asarray(starts, bool),
                 finals or {})


def test_each_copys_transitions_land_in_the_replay_buffer_as_they_happened() -> None:
    # learning_starts above what is sent: the buffer holds exactly what the muscle sent.
    muscle, brain = pair(2, learning_starts=1_000)
    steps = [
        # The run's first step: both copies start, none acted.
        batch(obs(0, 10), acted=(False, False), starts=(True, True)),
        batch(obs(1, 11), rewards=(1, 2)),
        # Copy 0's episode ends (terminated) and it restarts at 100 in the same step; its
        # transition goes to the final observation 2, and does not bootstrap.
        batch(obs(100, 12), rewards=(3, 4), terminated=(True, False), starts=(True, False),
              finals={0: obs(2)[0]}),
        # Copy 1 is cut short (truncated) at 13 and restarts at 200: it bootstraps from 13.
        batch(obs(101, 200), rewards=(5, 6), truncated=(False, True), starts=(False, True),
              finals={1: obs(13)[0]}),
        # Gymnasium's NEXT_STEP autoreset: copy 0 ends with its final observation in its row...
        batch(obs(102, 201), rewards=(7, 8), terminated=(True, False)),
        # ... and is reset by the next step, which ignores its action: it did not act.
        batch(obs(300, 202), rewards=(0, 9), acted=(False, True), starts=(True, False)),
        batch(obs(301, 203), rewards=(10, 11)),
    ]
    actions = []
    for step in steps:
        if step.acted.any():
            learn(muscle, brain, muscle.feedback_batch(SLOT, step))
        actions.append(muscle.act_batch(SLOT, step))
    # (copy, step its action was taken at, observation, reward, next observation, terminated)
    expected = [(0, 0, 0, 1, 1, False), (1, 0, 10, 2, 11, False),
                (0, 1, 1, 3, 2, True), (1, 1, 11, 4, 12, False),
                (0, 2, 100, 5, 101, False), (1, 2, 12, 6, 13, False),
                (0, 3, 101, 7, 102, True), (1, 3, 200, 8, 201, False),
                (1, 4, 201, 9, 202, False),
                (0, 5, 300, 10, 301, False), (1, 5, 202, 11, 203, False)]
    stored = brain.buffer.contents()
    assert len(stored) == len(expected) == brain.transitions
    for i, (copy, at, x, reward, next_x, terminated) in enumerate(expected):
        got = (stored.observations[i].tolist(), int(stored.actions[i]),
               float(stored.rewards[i]), stored.next_observations[i].tolist(),
               bool(stored.terminated[i]), stored.next_masks[i].all())
        assert got == ([x, -x], int(actions[at][copy]), reward, [next_x, -next_x], terminated,
                       True), f"transition {i} (copy {copy})"


def test_an_ended_copys_transition_has_the_mask_of_its_final_observation() -> None:
    muscle, brain = pair(2, learning_starts=1_000)

    def masked(observations: np.ndarray, masks: Any) -> dict[str, np.ndarray]:
        return {"observation": observations, "action_mask": np.asarray(masks, np.int8)}

    muscle.act_batch(SLOT, batch(masked(obs(0, 10), [[1, 1, 1], [1, 1, 1]]),
                                 acted=(False, False), starts=(True, True)))
    # Copy 0 ends with only action 1 legal and restarts with 0 and 2; copy 1 goes on.
    final = {"observation": obs(1)[0], "action_mask": np.array([0, 1, 0], np.int8)}
    ended = batch(masked(obs(100, 11), [[1, 0, 1], [0, 0, 1]]),
                  rewards=(1, 1), truncated=(True, False), starts=(True, False),
                  finals={0: final})
    learn(muscle, brain, muscle.feedback_batch(SLOT, ended))
    stored = brain.buffer.contents()
    assert stored.next_observations.tolist() == [[1, -1], [11, -11]]
    assert stored.next_masks.tolist() == [[False, True, False], [False, False, True]]
    assert stored.terminated.tolist() == [False, False]


def _pace(copies: int, env_steps: int, **params: Any) -> list[tuple[int, ...]]:
    """Per env step, after the batch step that took it: (epsilon, updates, target copies,
    brain version, version the muscle acts with), with ``copies`` copies (0: one environment);
    rows for env steps inside a batch step repeat its values."""
    muscle, brain = pair(copies, **params)
    n = max(copies, 1)
    targets = 0
    copy_target = brain.target.load_arrays

    def counted(*args: Any, **kwargs: Any) -> None:
        nonlocal targets
        targets += 1
        copy_target(*args, **kwargs)

    brain.target.load_arrays = counted  # type: ignore[method-assign]
    rng = np.random.default_rng(0)
    observations = rng.normal(size=(n, 2)).astype(np.float32)
    pace: list[tuple[int, ...]] = []
    if copies:
        muscle.act_batch(SLOT, batch(observations, acted=[False] * n, starts=[True] * n))
    else:
        muscle.reset()
        muscle.act(SLOT, observations[0])
    while len(pace) < env_steps:
        observations = rng.normal(size=(n, 2)).astype(np.float32)
        if copies:
            step = batch(observations, np.ones(n), [False] * n, [False] * n, [True] * n,
                         [False] * n)
            learn(muscle, brain, muscle.feedback_batch(SLOT, step))
        else:
            learn(muscle, brain, muscle.feedback(SLOT, 1.0, False, False, observations[0]))
        # Epsilon as the next action (of each copy) is drawn with it.
        row = (round(muscle.epsilon * 1e6), brain.updates, targets, brain.version, muscle.version)
        pace.extend([row] * n)
        if copies:
            muscle.act_batch(SLOT, step)
        else:
            muscle.act(SLOT, observations[0])
    return pace[:env_steps]


@pytest.mark.parametrize("train_every", [1, 3])
def test_updates_targets_weights_and_epsilon_keep_their_pace_per_env_step(
        train_every: int) -> None:
    params = {"learning_starts": 10, "train_every": train_every, "target_update_every": 8,
              "sync_every": 5, "epsilon_decay_steps": 60}
    one = _pace(0, 120, **params)
    four = _pace(4, 120, **params)
    # After every batch step (4 env steps) the counts are those of one environment then.
    for step in range(3, 120, 4):
        assert four[step][:4] == one[step][:4], f"env step {step + 1}"
    assert one[-1][1] == (120 - 10 + 1) // train_every > 0 and one[-1][2] > 0
    # With copies too, the muscle acts on the brain's newest weights after every batch step.
    for step in range(3, 120, 4):
        assert four[step][4] == four[step][3]


class RecordingDQNBrain(DQNBrain):
    """A DQNBrain that keeps every item of experience it is sent (in this process)."""

    items: ClassVar[list[dict[str, np.ndarray]]] = []

    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray] | None:
        self.items.append({name: np.array(value) for name, value in experience.items()
                           if value is not None})
        return super().learn(muscle, experience)


def test_in_a_run_with_copies_every_transition_is_one_cartpole_makes(tmp_path: Path) -> None:
    RecordingDQNBrain.items.clear()
    experiment = {
        "uid": "dqn-copies", "seed": 0, "placement": "thread",
        "environments": [{"uid": "cartpole", "env": "gymnasium:CartPole-v1", "copies": 3}],
        "agents": [{"uid": "learner", "brain": f"{__name__}:RecordingDQNBrain",
                    "muscle": "mosaic.agents.learners:DQNMuscle",
                    "params": {**SMALL, "learning_starts": 50, "epsilon_decay_steps": 300}}],
        # max_steps: some episodes are cut short (truncated) as well as ended (terminated).
        "phases": [{"name": "train", "mode": "train", "episodes": 60, "max_steps": 25}],
    }
    results = mosaic.run(experiment, progress=False,
                         store={"path": str(tmp_path / "run.sqlite")})
    assert results[0].status == "finished", results[0].error
    got = {name: np.concatenate([item[name] for item in RecordingDQNBrain.items])
           for name in ("observations", "actions", "rewards", "next_observations",
                        "terminated", "truncated")}
    assert len(got["actions"]) >= results[0].steps - 3  # all but the ones the run's end cut
    assert got["terminated"].any() and got["truncated"].any()
    env = CartPoleEnv()
    env.reset(seed=0)
    for i, action in enumerate(got["actions"].tolist()):
        # CartPole from each transition's observation, with its action: the next observation
        # (float32 apart), the reward and whether it terminated must be the transition's.
        env.state = got["observations"][i].astype(np.float64)
        env.steps_beyond_terminated = None
        next_x, reward, terminated, _, _ = env.step(action)
        assert np.allclose(next_x, got["next_observations"][i], atol=1e-5), f"transition {i}"
        assert (reward, terminated) == (got["rewards"][i], got["terminated"][i]), i
    env.close()
