"""Tabular Q-learning: it learns FrozenLake, is reproducible, honours masks, and test mode does
not learn."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, MuscleContext, Slot
from mosaic.agents.learners import Harness, TabularQBrain, TabularQMuscle
from mosaic.agents.policies import QTablePolicy, load_policy
from mosaic.core.errors import MosaicError
from mosaic.messages.codec import pack, unpack
from tests.agents.recording import Recording, Refusing

pytestmark = pytest.mark.timeout(60)

# Over 40 seeds the greedy policy first reached the goal after 131 episodes (median), 362 at most.
TRAIN_EPISODES = 500


class RecordingMuscle(Recording, TabularQMuscle):
    """Remembers every action it takes and every experience it returns."""


class RefusingBrain(Refusing, TabularQBrain):
    """Fails the test if a test-mode muscle sends experience."""


def frozen_lake() -> gymnasium.Env:
    return gymnasium.make("FrozenLake-v1", is_slippery=False)


def slots(n_states: int = 16, n_actions: int = 4, uids=("agent_0",)) -> dict[str, Slot]:
    return {uid: Slot(uid, spaces.Discrete(n_states), spaces.Discrete(n_actions)) for uid in uids}


def muscle_with(mode: str = "train", seed: int = 0, **params: Any) -> TabularQMuscle:
    muscle = TabularQMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", slots(), seed, mode, params))
    return muscle


def brain_with(seed: int = 0, **params: Any) -> TabularQBrain:
    brain = TabularQBrain()
    brain.setup(BrainContext("a", "a", slots(), seed, "train", params))
    return brain


def train(seed: int, episodes: int = TRAIN_EPISODES, **params: Any):
    env = frozen_lake()
    muscle, brain = RecordingMuscle(), TabularQBrain()
    with Harness(env, muscle, brain, seed=seed, params=params) as harness:
        stats = harness.run(episodes)
    env.close()
    return muscle, brain, stats


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frozen_lake_is_learnt_and_the_greedy_test_phase_succeeds(tmp_path, seed):
    _, brain, stats = train(seed=seed)
    checkpoint = brain.greedy_checkpoint(tmp_path / "q")
    env = frozen_lake()
    with Harness(env, TabularQMuscle(), RefusingBrain(), seed=seed + 100, mode="test",
                 params={"load_checkpoint": str(checkpoint)}) as harness:
        test = harness.run(100)
    env.close()
    success = np.mean([s.total_reward for s in test])
    assert success >= 0.9
    # Exploration at the start is random (about 1.5% success); learning shows before the end.
    assert np.mean([s.total_reward for s in stats[-50:]]) > 0.5
    # The RL worker reads the same checkpoint and plays the same greedy action.
    policy = load_policy(checkpoint)
    assert isinstance(policy, QTablePolicy)
    assert np.array_equal(policy.q, brain.q)


def test_same_seed_gives_identical_actions_and_tables_and_another_seed_does_not():
    first, brain_a, _ = train(seed=3, episodes=60)
    second, brain_b, _ = train(seed=3, episodes=60)
    other, _, _ = train(seed=4, episodes=60)
    assert first.actions == second.actions
    assert np.array_equal(brain_a.q, brain_b.q)
    assert first.actions != other.actions


def test_experience_is_a_plain_transition_that_survives_the_codec():
    muscle, _, _ = train(seed=1, episodes=5)
    for transition in muscle.experience:
        assert [type(v) for v in transition] == [int, int, float, int, bool, bool]
        assert unpack(pack(transition)) == transition


def test_test_mode_is_greedy_and_sends_no_experience():
    muscle = muscle_with("test")
    muscle.q[3] = [0.0, 2.0, 2.0, 1.0]
    muscle.reset()
    assert [muscle.act("agent_0", 3) for _ in range(20)] == [1] * 20  # ties go to the lowest
    assert muscle.feedback("agent_0", 1.0, False, False, 4) is None
    assert muscle.feedback("agent_0", 1.0, True, False, 4) is None


def test_test_mode_run_leaves_the_brain_untouched():
    env = frozen_lake()
    brain = TabularQBrain()
    with Harness(env, muscle := RecordingMuscle(), brain, seed=0, mode="test") as harness:
        harness.run(5)
    env.close()
    assert muscle.experience == [] and np.all(brain.q == 0.0)


def test_masks_are_honoured_when_exploring_and_when_greedy():
    for mode, epsilon in [("train", 1.0), ("train", 0.0), ("test", 0.0)]:
        muscle = muscle_with(mode, epsilon=epsilon)
        muscle.q[0] = [9.0, 0.0, 5.0, 0.0]  # the best action is illegal
        muscle.reset()
        mask = np.array([0, 1, 1, 0], dtype=np.int8)
        actions = {muscle.act("agent_0", 0, mask) for _ in range(200)}
        assert actions <= {1, 2}
        if epsilon == 0.0:
            assert actions == {2}
        else:
            assert actions == {1, 2}
    muscle = muscle_with(epsilon=1.0)
    with pytest.raises(MosaicError, match="allows no action"):
        muscle.act("agent_0", 0, np.zeros(4))
    # PettingZoo's observation dict carries the mask with it.
    assert muscle.act("agent_0", {"observation": 0, "action_mask": np.eye(4)[3]}) == 3


def test_epsilon_decays_linearly_over_episodes_then_stays():
    muscle = muscle_with(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_episodes=10)
    seen = []
    for _ in range(12):
        muscle.reset()
        seen.append(muscle.epsilon)
    assert seen[0] == 1.0 and seen[5] == pytest.approx(0.55) and seen[10:] == [0.1, 0.1]
    assert muscle_with(epsilon=0.3).epsilon == 0.3


def test_q_update_and_the_update_every_schedule():
    brain = brain_with(learning_rate=0.5, discount=0.9, update_every=3)
    brain.q[5] = [0.0, 4.0, 0.0, 0.0]
    assert brain.learn("m", (0, 2, 1.0, 5, False, False)) is None
    assert brain.q[0, 2] == pytest.approx(0.5 * (1.0 + 0.9 * 4.0))
    assert brain.learn("m", (1, 0, 1.0, 5, True, False)) is None  # terminal: no bootstrap
    assert brain.q[1, 0] == pytest.approx(0.5)
    update = brain.learn("m", (2, 0, 0.0, 5, False, True))  # truncated: still bootstraps
    assert brain.q[2, 0] == pytest.approx(0.5 * 0.9 * 4.0)
    assert update is not None and np.array_equal(update["q"], brain.q)
    update["q"][0, 0] = 99.0  # the answer is a copy
    assert brain.q[0, 0] == 0.0

    at_end = brain_with()
    assert at_end.learn("m", (0, 0, 0.0, 1, False, False)) is None
    assert at_end.learn("m", (1, 0, 0.0, 2, False, True)) is not None
    assert at_end.learn("m", (0, 0, 0.0, 1, True, False)) is not None


def test_several_muscles_share_one_table_with_their_own_schedules():
    brain = brain_with(update_every=2)
    assert brain.learn("m1", (0, 1, 1.0, 1, False, False)) is None
    assert brain.learn("m2", (0, 1, 1.0, 1, False, False)) is None
    assert brain.q[0, 1] == pytest.approx(0.1 + 0.1 * 0.9)
    update = brain.learn("m1", (3, 3, 0.0, 4, False, False))
    assert update is not None
    muscle = muscle_with()
    muscle.apply_update(unpack(pack(update)))
    assert np.array_equal(muscle.q, brain.q)


def test_state_round_trip_is_exact_and_checks_the_shape():
    _, brain, _ = train(seed=2, episodes=200)
    state = brain.state()
    fresh = brain_with()
    fresh.load_state(state)
    assert np.array_equal(fresh.state()["q"], state["q"]) and np.any(state["q"] != 0.0)
    assert fresh.state()["q"] is not state["q"]
    with pytest.raises(MosaicError, match="shape"):
        fresh.load_state({"q": np.zeros((3, 3))})


def test_checkpoint_saved_at_teardown_in_train_mode_only(tmp_path):
    path = tmp_path / "trained.npz"
    brain = brain_with(save_checkpoint=str(path))
    brain.q[0, 1] = 1.0
    brain.teardown()
    assert np.array_equal(load_policy(path).q, brain.q)
    tester = TabularQBrain()
    tester.setup(BrainContext("a", "a", slots(), 0, "test", {"save_checkpoint": str(path)}))
    tester.teardown()
    assert load_policy(path).q[0, 1] == 1.0
    loaded = brain_with(load_checkpoint=str(path))
    assert np.array_equal(loaded.q, brain.q)
    assert np.array_equal(muscle_with("test", load_checkpoint=str(path)).q, brain.q)


def test_unsupported_spaces_and_bad_params_are_refused_with_the_reason():
    box = {"agent_0": Slot("agent_0", spaces.Box(-1, 1, (2,)), spaces.Discrete(2))}
    with pytest.raises(MosaicError, match="Discrete observation"):
        TabularQBrain().setup(BrainContext("a", "a", box, 0))
    mixed = {**slots(uids=("p0",)), **slots(9, 4, uids=("p1",))}
    with pytest.raises(MosaicError, match="same space sizes"):
        TabularQMuscle().setup(MuscleContext("a", "m", "e", mixed, 0))
    with pytest.raises(MosaicError, match=r"params\.learning_rate"):
        brain_with(learning_rate=0.0)
    with pytest.raises(MosaicError, match=r"params\.update_every"):
        brain_with(update_every=1.5)
    with pytest.raises(MosaicError, match="state index"):
        muscle_with().act("agent_0", np.array([0.5]))


def test_reports_epsilon_per_episode_and_td_error_with_updates_per_episode():
    muscle, brain, _ = train(0, episodes=5, epsilon_decay_episodes=4)
    epsilons = [value for name, value, _ in muscle.context.metrics.take()]
    assert epsilons == pytest.approx([1.0, 0.7625, 0.525, 0.2875, 0.05])
    reported = brain.context.metrics.take()
    assert [name for name, _, _ in reported] == ["td_error", "updates"] * 5
    updates = [value for name, value, _ in reported if name == "updates"]
    assert updates == sorted(updates) and updates[-1] == brain.updates
    assert all(value >= 0 for name, value, _ in reported if name == "td_error")


def test_test_mode_reports_no_epsilon():
    muscle = muscle_with(mode="test")
    muscle.reset()
    assert muscle.context.metrics.take() == []
