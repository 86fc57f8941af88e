"""The global state a parallel adapter gives when asked: ``env.state()`` where the environment
has one, the joint observation otherwise, in every slot's info; nothing when not asked; and the
factory refuses to give it for other environments, with the reason."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from mosaic.core.errors import MosaicError
from mosaic.environments.factory import make_any, make_environment
from mosaic.environments.global_state import GLOBAL_STATE
from mosaic.environments.pettingzoo_adapter import ParallelAdapter

pytest.importorskip("mpe2")

SPREAD = "mpe2.simple_spread_v3:parallel_env"


def test_simple_spread_gives_its_state_in_every_slots_info() -> None:
    adapter = make_environment(SPREAD, {"global_state": True, "max_cycles": 3})
    try:
        assert isinstance(adapter, ParallelAdapter)
        env = adapter.env
        outcome = adapter.reset(5)
        assert set(outcome.infos) == set(env.possible_agents)
        first = outcome.infos["agent_0"][GLOBAL_STATE]
        assert first.dtype == np.float64 and first.shape == (54,)
        np.testing.assert_array_equal(first, np.asarray(env.state(), dtype=np.float64))
        outcome = adapter.step({agent: 1 for agent in outcome.acting})
        state = outcome.infos["agent_2"][GLOBAL_STATE]
        np.testing.assert_array_equal(state, np.asarray(env.state(), dtype=np.float64))
        assert not np.array_equal(state, first)  # the agents moved
    finally:
        adapter.close()


def test_an_environment_without_state_gives_its_joint_observation() -> None:
    """rps_v2 has no state(): its Discrete observations, one-hot flattened, in agent order."""
    adapter = make_environment("pettingzoo:classic.rps_v2",
                               {"api": "parallel", "global_state": True})
    try:
        outcome = adapter.reset(1)
        outcome = adapter.step({"player_0": 0, "player_1": 2})
        n = spaces.flatdim(adapter.slots["player_0"][0])
        expected = np.concatenate([np.eye(n)[outcome.observations["player_0"]],
                                   np.eye(n)[outcome.observations["player_1"]]])
        for slot in ("player_0", "player_1"):
            np.testing.assert_array_equal(outcome.infos[slot][GLOBAL_STATE], expected)
    finally:
        adapter.close()


def test_nothing_is_added_unless_asked() -> None:
    adapter = make_environment(SPREAD, {"max_cycles": 3})
    try:
        outcome = adapter.reset(5)
        assert all(GLOBAL_STATE not in info for info in outcome.infos.values())
        outcome = adapter.step({agent: 0 for agent in outcome.acting})
        assert all(GLOBAL_STATE not in info for info in outcome.infos.values())
    finally:
        adapter.close()


@pytest.mark.parametrize(("spec", "params", "reason"), [
    ("mpe2.simple_spread_v3:env", {"global_state": True}, "it made a pettingzoo.AECEnv"),
    ("gymnasium:CartPole-v1", {"global_state": True}, "it made a gymnasium.Env"),
    (SPREAD, {"global_state": "yes"}, "params.global_state must be true or false, not 'yes'"),
])
def test_other_environments_and_bad_values_are_refused(spec: str, params: dict[str, object],
                                                       reason: str) -> None:
    with pytest.raises(MosaicError, match="global_state") as error:
        make_any(spec, params)
    assert reason in str(error.value)


def test_copies_are_refused() -> None:
    with pytest.raises(MosaicError, match="neither copies nor record_video"):
        make_any(SPREAD, {"global_state": True}, copies=2)


def test_a_sisl_game_gives_its_state_too() -> None:
    """pursuit_v5 (8 pursuers, cooperative): its 768-value state() fits in an info."""
    adapter = make_environment("pettingzoo:sisl.pursuit_v5",
                               {"api": "parallel", "global_state": True, "max_cycles": 2})
    try:
        outcome = adapter.reset(0)
        state = outcome.infos["pursuer_7"][GLOBAL_STATE]
        assert state.shape == (768,) and len(outcome.infos) == 8
        np.testing.assert_array_equal(state, np.ravel(adapter.env.state()))  # a 16x16x3 grid
    finally:
        adapter.close()
