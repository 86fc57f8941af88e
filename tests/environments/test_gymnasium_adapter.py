"""Gymnasium environments behind mosaic's adapter: one slot, masks from the info, values as is."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.utils.env_match import check_environments_match

from mosaic.core.errors import MosaicError
from mosaic.environments import GYMNASIUM_SLOT, GymnasiumAdapter, Outcome, make_environment
from tests.fixtures.envs import TAXI

pytestmark = pytest.mark.timeout(60)


def gym_adapter(spec: str, params: dict[str, Any] | None = None) -> GymnasiumAdapter:
    adapter = make_environment(spec, params or {})
    assert isinstance(adapter, GymnasiumAdapter)
    return adapter


@pytest.mark.parametrize("spec", ["gymnasium:CartPole-v1", f"gymnasium:{TAXI}",
                                  "gymnasium.envs.classic_control:CartPoleEnv"])
# CartPole's velocities are unbounded by design; the checker advises against that.
@pytest.mark.filterwarnings("ignore:.*Box observation space m..imum value is")
def test_the_envs_mosaic_wraps_pass_gymnasiums_checker(spec: str) -> None:
    adapter = gym_adapter(spec)
    check_env(adapter.env.unwrapped, skip_render_check=True)


def test_an_id_and_an_import_path_make_matching_environments() -> None:
    by_id = gym_adapter("gymnasium:CartPole-v1").env
    by_path = gym_adapter("gymnasium.envs.classic_control:CartPoleEnv").env
    check_environments_match(by_id, by_path, num_steps=50, seed=3, skip_render=True)


def test_one_slot_with_the_envs_own_spaces() -> None:
    adapter = gym_adapter("gymnasium:CartPole-v1")
    assert list(adapter.slots) == [GYMNASIUM_SLOT]
    observation_space, action_space = adapter.slots[GYMNASIUM_SLOT]
    assert observation_space is adapter.env.observation_space
    assert action_space is adapter.env.action_space


def test_reset_and_step_pass_the_envs_values_through() -> None:
    adapter = gym_adapter("gymnasium:CartPole-v1")
    twin = gymnasium.make("CartPole-v1")
    first = adapter.reset(11)
    expected, _ = twin.reset(seed=11)
    assert first.acting == (GYMNASIUM_SLOT,) and first.rewards == {}
    assert not (first.terminated or first.truncated) and first.legal_actions == {}
    np.testing.assert_array_equal(first.observations[GYMNASIUM_SLOT], expected)
    for step in range(500):
        outcome = adapter.step({GYMNASIUM_SLOT: step % 2})
        observation, reward, terminated, truncated, _ = twin.step(step % 2)
        np.testing.assert_array_equal(outcome.observations[GYMNASIUM_SLOT], observation)
        assert outcome.rewards == {GYMNASIUM_SLOT: reward}
        assert type(outcome.rewards[GYMNASIUM_SLOT]) is float
        assert (outcome.terminated, outcome.truncated) == (terminated, truncated)
        assert outcome.acting == (GYMNASIUM_SLOT,)
        if terminated or truncated:
            break
    assert outcome.terminated


def test_params_reach_gymnasium_make() -> None:
    adapter = gym_adapter("gymnasium:CartPole-v1", {"max_episode_steps": 3})
    adapter.reset(0)
    outcomes = [adapter.step({GYMNASIUM_SLOT: 0}) for _ in range(3)]
    assert [o.truncated for o in outcomes] == [False, False, True]


def test_masks_in_the_info_become_legal_actions() -> None:
    adapter = gym_adapter(f"gymnasium:{TAXI}")
    taxi = adapter.env.unwrapped
    rng = np.random.default_rng(0)
    outcome = adapter.reset(4)
    for _ in range(200):
        mask = outcome.legal_actions[GYMNASIUM_SLOT]
        np.testing.assert_array_equal(mask, taxi.action_mask(taxi.s))  # type: ignore[attr-defined]
        outcome = adapter.step({GYMNASIUM_SLOT: int(rng.choice(np.flatnonzero(mask)))})
        if outcome.terminated or outcome.truncated:
            outcome = adapter.reset(None)


def test_the_same_seed_and_actions_give_the_same_observations() -> None:
    def trajectory(seed: int) -> list[Outcome]:
        adapter = gym_adapter("gymnasium:CartPole-v1")
        outcomes = [adapter.reset(seed)]
        actions = np.random.default_rng(1).integers(2, size=30)
        for action in actions:
            outcomes.append(adapter.step({GYMNASIUM_SLOT: int(action)}))
            if outcomes[-1].terminated or outcomes[-1].truncated:
                break
        return outcomes

    first, second, other = trajectory(8), trajectory(8), trajectory(9)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.observations[GYMNASIUM_SLOT],
                                      b.observations[GYMNASIUM_SLOT])
        assert a.rewards == b.rewards
    assert not np.array_equal(first[0].observations[GYMNASIUM_SLOT],
                              other[0].observations[GYMNASIUM_SLOT])


def test_close_is_idempotent() -> None:
    adapter = gym_adapter("gymnasium:CartPole-v1")
    adapter.close()
    adapter.close()


@pytest.mark.parametrize(("spec", "message"), [
    ("CartPole-v1", "expected 'gymnasium:<id>'"),
    ("no.such.module:Env", "no module named 'no'"),
    ("builtins:dict", "made a dict"),
])
def test_specs_that_make_no_environment_are_refused(spec: str, message: str) -> None:
    with pytest.raises(MosaicError, match=message):
        make_environment(spec, {})
