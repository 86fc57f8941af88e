"""PettingZoo environments behind mosaic's adapter: turns, masks, dead agents, rewards, endings."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv

from mosaic.core.errors import MosaicError
from mosaic.environments import (
    AECAdapter,
    EnvironmentAdapter,
    Outcome,
    ParallelAdapter,
    action_mask,
    make_environment,
)

pytestmark = [
    pytest.mark.timeout(60),
    # PettingZoo >= 1.26 warns on every import of an environment module such as tictactoe_v3.
    pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning"),
]

TICTACTOE = "pettingzoo:classic.tictactoe_v3"
CONNECT_FOUR = "pettingzoo:classic.connect_four_v3"
RPS = "pettingzoo:classic.rps_v2"
RPS_PARALLEL: dict[str, Any] = {"api": "parallel"}
RELAY = "tests.environments.test_pettingzoo_adapter:Relay"
STAGGERED = "tests.environments.test_pettingzoo_adapter:Staggered"


# -- small environments of our own, for what the classic games never do ------------------------

A, B, C = "runner_0", "runner_1", "runner_2"


class Relay(AECEnv[str, np.ndarray, int]):
    """Three runners take turns: ``A`` terminates after 1 move, ``B`` after 2, ``C`` is truncated
    after 3. Observations are draws from the seeded ``np_random``; masks are in the infos (one
    action is illegal per move, and an illegal action raises). The reward of a move is its action.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "relay_v0", "render_modes": [], "is_parallelizable": False
    }
    lives: ClassVar[dict[str, int]] = {A: 1, B: 2, C: 3}

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = [A, B, C]
        self._observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self._action_space = spaces.Discrete(3)
        self.np_random, _ = seeding.np_random(None)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._action_space

    def _mask(self, agent: str) -> np.ndarray:
        mask = np.ones(3, dtype=np.int8)
        mask[self.moves[agent] % 3] = 0
        return mask

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.agents = list(self.possible_agents)
        self.moves = dict.fromkeys(self.agents, 0)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {"action_mask": self._mask(agent)} for agent in self.agents}
        self.seen = {agent: self.np_random.random(2, dtype=np.float32) for agent in self.agents}
        self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> np.ndarray:
        return self.seen[agent].copy()

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if action is None or not self.infos[agent]["action_mask"][action]:
            raise ValueError(f"illegal action {action!r} for {agent}")
        self._cumulative_rewards[agent] = 0
        self._clear_rewards()
        self.rewards[agent] = float(action)
        self.moves[agent] += 1
        done = self.moves[agent] >= self.lives[agent]
        if agent == C:
            self.truncations[agent] = done
        else:
            self.terminations[agent] = done
        self.seen[agent] = self.np_random.random(2, dtype=np.float32)
        self.infos[agent] = {"action_mask": self._mask(agent)}
        self.agent_selection = self._next_live(agent)
        self._accumulate_rewards()
        self._deads_step_first()

    def _next_live(self, after: str) -> str:
        order = self.possible_agents
        start = order.index(after)
        for offset in range(1, len(order) + 1):
            agent = order[(start + offset) % len(order)]
            if agent in self.agents and not (self.terminations[agent] or self.truncations[agent]):
                return agent
        return after

    def render(self) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to release."""


class Staggered(ParallelEnv[str, np.ndarray, int]):
    """Two agents act together: ``x`` terminates after 2 steps, ``y`` is truncated after 4.
    Observations are draws from the seeded ``np_random``; masks are in the infos (action
    ``steps % 3`` is illegal, and counted in ``illegal_moves``: PettingZoo's parallel_api_test
    does not read masks from infos). Each agent's reward is its action.
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "staggered_v0", "render_modes": []}

    def __init__(self) -> None:
        self.possible_agents = ["x", "y"]
        self._observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self._action_space = spaces.Discrete(3)
        self.np_random, _ = seeding.np_random(None)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._action_space

    def _mask(self) -> np.ndarray:
        mask = np.ones(3, dtype=np.int8)
        mask[self.steps % 3] = 0
        return mask

    def _observe(self) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        observations = {a: self.np_random.random(2, dtype=np.float32) for a in self.agents}
        return observations, {agent: {"action_mask": self._mask()} for agent in self.agents}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.agents = list(self.possible_agents)
        self.steps = 0
        self.illegal_moves = 0
        return self._observe()

    def step(self, actions: dict[str, int]) -> tuple[Any, ...]:
        mask = self._mask()
        self.illegal_moves += sum(not mask[actions[agent]] for agent in self.agents)
        self.steps += 1
        rewards = {agent: float(actions[agent]) for agent in self.agents}
        terminations = {agent: agent == "x" and self.steps >= 2 for agent in self.agents}
        truncations = {agent: agent == "y" and self.steps >= 4 for agent in self.agents}
        observations, infos = self._observe()
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos


# -- helpers ------------------------------------------------------------------------------------

def make(spec: str, params: dict[str, Any] | None = None) -> EnvironmentAdapter:
    return make_environment(spec, params or {})


def legal_choice(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def play(adapter: EnvironmentAdapter, seed: int, rng: np.random.Generator,
         check: Callable[[Outcome], None] = lambda outcome: None,
         played: list[dict[str, Any]] | None = None, max_steps: int = 1000) -> list[Outcome]:
    """One episode with a player that picks uniformly among the legal actions.

    Returns the outcomes, the reset's first; appends the actions of each step to ``played``.
    """
    outcomes = [adapter.reset(seed)]
    check(outcomes[0])
    while not (outcomes[-1].terminated or outcomes[-1].truncated):
        assert len(outcomes) <= max_steps, "the episode does not end"
        last = outcomes[-1]
        actions = {slot: legal_choice(rng, last.legal_actions[slot]) if slot in last.legal_actions
                   else int(rng.integers(adapter.slots[slot][1].n))  # type: ignore[attr-defined]
                   for slot in last.acting}
        if played is not None:
            played.append(actions)
        outcomes.append(adapter.step(actions))
        check(outcomes[-1])
    return outcomes


def returns(outcomes: list[Outcome]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for outcome in outcomes:
        for slot, reward in outcome.rewards.items():
            totals[slot] = totals.get(slot, 0.0) + reward
    return totals


def action_sums(played: list[dict[str, Any]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for actions in played:
        for slot, action in actions.items():
            totals[slot] = totals.get(slot, 0.0) + float(action)
    return totals


def tictactoe_free_cells(observation: dict[str, np.ndarray]) -> np.ndarray:
    """1 for each empty cell of a tic-tac-toe board (planes: own marks, opponent's marks)."""
    board = observation["observation"]
    return (board.sum(axis=-1) == 0).astype(np.int8).flatten()


# -- making environments ------------------------------------------------------------------------

class TestMakeEnvironment:
    def test_a_pettingzoo_module_makes_an_aec_adapter_with_the_envs_own_spaces(self) -> None:
        adapter = make(TICTACTOE)
        assert isinstance(adapter, AECAdapter)
        assert list(adapter.slots) == ["player_1", "player_2"]
        for slot, (observation_space, action_space) in adapter.slots.items():
            assert observation_space is adapter.env.observation_space(slot)
            assert action_space is adapter.env.action_space(slot)
        assert adapter.slots["player_1"][1] == spaces.Discrete(9)
        adapter.close()

    def test_aec_is_preferred_and_api_parallel_asks_for_parallel_env(self) -> None:
        assert isinstance(make(RPS), AECAdapter)
        parallel = make(RPS, {"api": "parallel", "max_cycles": 3})
        assert isinstance(parallel, ParallelAdapter)
        # max_cycles reached parallel_env (api did not: it would be an unexpected keyword).
        outcomes = play(parallel, 0, np.random.default_rng(0))
        assert len(outcomes) == 4 and outcomes[-1].truncated
        assert isinstance(make(RPS, {"api": "aec"}), AECAdapter)

    def test_params_reach_the_aec_constructor(self) -> None:
        outcomes = play(make(RPS, {"max_cycles": 2}), 0, np.random.default_rng(0))
        assert len(outcomes) == 5  # two rounds of two turns each, after the reset

    def test_a_bad_api_value_is_refused(self) -> None:
        with pytest.raises(MosaicError, match="'aec' or 'parallel'"):
            make(RPS, {"api": "turns"})

    def test_a_module_with_only_parallel_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        module = type(sys)("pettingzoo.classic.staggered_v0")
        module.parallel_env = Staggered  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pettingzoo.classic.staggered_v0", module)
        assert isinstance(make("pettingzoo:classic.staggered_v0"), ParallelAdapter)
        with pytest.raises(MosaicError, match=r"has no env\(\).*offers parallel_env\(\)"):
            make("pettingzoo:classic.staggered_v0", {"api": "aec"})

    def test_an_unknown_module_names_close_ones(self) -> None:
        with pytest.raises(MosaicError, match="tictactoe_v3"):
            make("pettingzoo:classic.tictactoe_v9")

    @pytest.mark.parametrize(("spec", "adapter_type"), [
        ("pettingzoo.classic.tictactoe_v3:env", AECAdapter),
        ("pettingzoo.classic.rps_v2:parallel_env", ParallelAdapter),
        ("pettingzoo.classic.rps.rps:raw_env", AECAdapter),
        (RELAY, AECAdapter),
        (STAGGERED, ParallelAdapter),
    ])
    def test_an_import_path_to_a_class_or_factory(self, spec: str, adapter_type: type) -> None:
        assert isinstance(make(spec), adapter_type)

    def test_an_import_path_to_something_else_is_refused(self) -> None:
        with pytest.raises(MosaicError, match="made a dict"):
            make("builtins:dict")
        with pytest.raises(MosaicError, match="no attribute"):
            make("pettingzoo.classic.rps_v2:envv")

    def test_adapters_refuse_the_other_api(self) -> None:
        with pytest.raises(MosaicError, match="AECEnv"):
            AECAdapter(Staggered())  # type: ignore[arg-type]
        with pytest.raises(MosaicError, match="ParallelEnv"):
            ParallelAdapter(Relay())  # type: ignore[arg-type]


# -- the envs mosaic wraps conform to PettingZoo's own tests ------------------------------------

@pytest.mark.parametrize("spec", [TICTACTOE, CONNECT_FOUR, RPS, RELAY])
# api_test's advice for board games, whose first observation is an empty board.
@pytest.mark.filterwarnings("ignore:Observation numpy array is all zeros")
def test_aec_envs_pass_pettingzoos_api_and_seed_tests(spec: str) -> None:
    # Imported here, so that the warnings its import raises are filtered too.
    from pettingzoo.test import api_test, seed_test

    api_test(make(spec).env, num_cycles=200)  # type: ignore[attr-defined]
    seed_test(lambda: make(spec).env, num_cycles=200)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("spec", "params"), [(RPS, RPS_PARALLEL), (STAGGERED, {})])
def test_parallel_envs_pass_pettingzoos_api_and_seed_tests(spec: str,
                                                          params: dict[str, Any]) -> None:
    from pettingzoo.test import parallel_api_test, parallel_seed_test

    parallel_api_test(make(spec, params).env, num_cycles=200)  # type: ignore[attr-defined]
    parallel_seed_test(lambda: make(spec, params).env, num_cycles=200)  # type: ignore[attr-defined]


# -- AEC ------------------------------------------------------------------------------------------

class TestAECAdapter:
    @pytest.mark.parametrize("spec", [TICTACTOE, CONNECT_FOUR])
    def test_a_masked_random_player_only_plays_legal_moves(self, spec: str) -> None:
        adapter = make(spec)
        env = adapter.env
        rng = np.random.default_rng(1)
        results = set()

        def check(outcome: Outcome) -> None:
            if outcome.terminated or outcome.truncated:
                assert outcome.acting == () and outcome.legal_actions == {}
                return
            [slot] = outcome.acting
            assert slot == env.agent_selection
            assert set(outcome.observations) == {slot}
            observation = outcome.observations[slot]
            mask = outcome.legal_actions[slot]
            # The mask is the one in the observation, kept there as the env gave it.
            assert mask is observation["action_mask"]
            assert adapter.slots[slot][0].contains(observation)
            if spec == TICTACTOE:
                np.testing.assert_array_equal(mask, tictactoe_free_cells(observation))

        for episode in range(60):
            outcomes = play(adapter, episode, rng, check)
            final = outcomes[-1]
            assert final.terminated and not final.truncated
            # An illegal move would end the game with -1 for the mover alone; legal games are
            # zero-sum: a win and a loss, or a draw.
            assert sum(final.rewards.values()) == 0
            results.add(tuple(sorted(final.rewards.values())))
            assert all(not o.rewards or sum(o.rewards.values()) == 0 for o in outcomes)
        assert (-1.0, 1.0) in results  # some games were won, so rewards were seen

    def test_the_turns_alternate_and_every_step_reports_every_agents_reward(self) -> None:
        adapter = make(TICTACTOE)
        outcomes = play(adapter, 0, np.random.default_rng(2))
        movers = [o.acting[0] for o in outcomes[:-1]]
        assert movers == [("player_1", "player_2")[i % 2] for i in range(len(movers))]
        assert outcomes[0].rewards == {}
        for outcome in outcomes[1:]:
            assert set(outcome.rewards) == {"player_1", "player_2"}
            assert all(type(r) is float for r in outcome.rewards.values())

    def test_a_win_gives_both_rewards_and_steps_the_dead_agents(self) -> None:
        adapter = make(TICTACTOE)
        adapter.reset(0)
        # player_1 takes the first column (cells 0, 1, 2); player_2 plays 3 and 4.
        for slot, cell in [("player_1", 0), ("player_2", 3), ("player_1", 1), ("player_2", 4)]:
            outcome = adapter.step({slot: cell})
            assert not outcome.terminated
        final = adapter.step({"player_1": 2})
        # The rewards are those of the winning move, read before the dead steps clear them.
        assert final.rewards == {"player_1": 1.0, "player_2": -1.0}
        assert (final.terminated, final.truncated, final.acting) == (True, False, ())
        # Both agents were stepped with None, and their final observations came back.
        assert adapter.env.agents == []
        assert set(final.observations) == {"player_1", "player_2"}
        with pytest.raises(MosaicError, match="reset"):
            adapter.step({"player_2": 5})
        assert adapter.reset(1).acting == ("player_1",)

    def test_an_illegal_move_ends_the_game_with_a_penalty_for_the_mover(
            self, caplog: pytest.LogCaptureFixture) -> None:
        adapter = make(TICTACTOE)
        adapter.reset(0)
        adapter.step({"player_1": 4})
        final = adapter.step({"player_2": 4})
        assert "Illegal move" in caplog.text
        assert final.rewards == {"player_1": 0.0, "player_2": -1.0}
        assert final.terminated and final.acting == ()

    def test_the_selected_agent_needs_an_action(self) -> None:
        adapter = make(TICTACTOE)
        adapter.reset(0)
        with pytest.raises(MosaicError, match="player_1"):
            adapter.step({"player_2": 0})

    def test_agents_that_leave_early_are_never_asked_to_act(self) -> None:
        adapter = make(RELAY)
        env = adapter.env
        played: list[dict[str, Any]] = []
        outcomes = play(adapter, 3, np.random.default_rng(3), played=played)
        movers = [o.acting[0] for o in outcomes[:-1]]
        # A: 1 move, B: 2, C: 3; the adapter stepped None for each as it left.
        assert movers == [A, B, C, B, C, C]
        assert env.agents == []
        # A's reward and final observation come with the step it left in; the episode goes on.
        first = outcomes[1]
        assert not first.terminated and set(first.observations) == {A, B}
        assert first.rewards == {A: first.rewards[A], B: 0.0, C: 0.0}
        assert first.rewards[A] > 0
        # The last agent was truncated, so the episode is truncated, though A and B terminated.
        assert (outcomes[-1].truncated, outcomes[-1].terminated) == (True, False)
        # Each move's reward is its action: the rewards add up to exactly that, although every
        # agent's last reward came with a step after which the adapter stepped it as dead.
        assert returns(outcomes) == action_sums(played)

    def test_masks_come_from_the_info_when_the_observation_has_none(self) -> None:
        adapter = make(RELAY)
        outcome = adapter.reset(0)
        np.testing.assert_array_equal(outcome.legal_actions[A], [0, 1, 1])
        assert isinstance(outcome.observations[A], np.ndarray)

    @pytest.mark.parametrize("spec", [CONNECT_FOUR, RELAY])
    def test_the_same_seed_and_actions_give_the_same_observations(self, spec: str) -> None:
        def trajectory(seed: int) -> list[Outcome]:
            return play(make(spec), seed, np.random.default_rng(4))

        first, second = trajectory(5), trajectory(5)
        assert len(first) == len(second)
        for a, b in zip(first, second, strict=True):
            assert a.acting == b.acting and a.rewards == b.rewards
            assert a.observations.keys() == b.observations.keys()
            for slot in a.observations:
                np.testing.assert_equal(a.observations[slot], b.observations[slot])
        if spec == RELAY:  # its observations are random: the seed must matter
            other = trajectory(6)
            assert not np.array_equal(other[0].observations[A], first[0].observations[A])

    def test_close_is_idempotent(self) -> None:
        adapter = make(TICTACTOE)
        adapter.close()
        adapter.close()


# -- Parallel -------------------------------------------------------------------------------------

class TestParallelAdapter:
    def test_rps_everyone_acts_every_step_until_truncated(self) -> None:
        adapter = make(RPS, {"api": "parallel", "max_cycles": 15})
        for episode in range(5):
            outcomes = play(adapter, episode, np.random.default_rng(episode))
            assert len(outcomes) == 16
            for outcome in outcomes[:-1]:
                assert outcome.acting == ("player_0", "player_1")
                assert set(outcome.observations) == {"player_0", "player_1"}
                assert outcome.legal_actions == {}
            for outcome in outcomes[1:]:
                assert set(outcome.rewards) == {"player_0", "player_1"}
                assert sum(outcome.rewards.values()) == 0
            final = outcomes[-1]
            assert (final.terminated, final.truncated, final.acting) == (False, True, ())
            assert adapter.env.agents == []

    def test_agents_leave_one_by_one_and_masks_are_honoured(self) -> None:
        adapter = make(STAGGERED)
        rng = np.random.default_rng(7)
        for episode in range(20):
            played: list[dict[str, Any]] = []
            outcomes = play(adapter, episode, rng, played=played)
            assert returns(outcomes) == action_sums(played)
            assert adapter.env.illegal_moves == 0  # type: ignore[attr-defined]
            assert [o.acting for o in outcomes] == [("x", "y")] * 2 + [("y",)] * 2 + [()]
            for outcome in outcomes[:-1]:
                assert set(outcome.legal_actions) == set(outcome.acting)
            # x terminated in step 2, its reward and final observation come with that step.
            assert set(outcomes[2].rewards) == {"x", "y"} and "x" in outcomes[2].observations
            assert not outcomes[2].terminated
            assert set(outcomes[3].rewards) == {"y"}
            assert (outcomes[-1].terminated, outcomes[-1].truncated) == (False, True)

    def test_every_acting_agent_needs_an_action(self) -> None:
        adapter = make(STAGGERED)
        adapter.reset(0)
        with pytest.raises(MosaicError, match=r"\['y'\]"):
            adapter.step({"x": 1})

    def test_stepping_after_the_end_needs_a_reset(self) -> None:
        adapter = make(RPS, {"api": "parallel", "max_cycles": 1})
        adapter.reset(0)
        assert adapter.step({"player_0": 0, "player_1": 1}).truncated
        with pytest.raises(MosaicError, match="reset"):
            adapter.step({"player_0": 0, "player_1": 1})

    def test_the_same_seed_and_actions_give_the_same_observations(self) -> None:
        spec = STAGGERED
        first = play(make(spec), 9, np.random.default_rng(1))
        second = play(make(spec), 9, np.random.default_rng(1))
        other = play(make(spec), 10, np.random.default_rng(1))
        for a, b in zip(first, second, strict=True):
            assert a.rewards == b.rewards
            for slot in a.observations:
                np.testing.assert_array_equal(a.observations[slot], b.observations[slot])
        assert not np.array_equal(first[0].observations["x"], other[0].observations["x"])


# -- masks ----------------------------------------------------------------------------------------

def test_action_mask_prefers_the_observation_then_the_info() -> None:
    in_observation, in_info = np.array([1, 0]), np.array([0, 1])
    assert action_mask({"action_mask": in_observation}, {"action_mask": in_info}) is in_observation
    assert action_mask({"observation": 1}, {"action_mask": in_info}) is in_info
    assert action_mask(np.zeros(2), {"action_mask": in_info}) is in_info
    assert action_mask(np.zeros(2), {}) is None
    assert action_mask(None, None) is None


def test_aec_outcomes_carry_the_infos_of_the_agents_they_observe() -> None:
    adapter = AECAdapter(Relay())
    outcome = adapter.reset(seed=3)
    assert set(outcome.infos) == {A}
    np.testing.assert_array_equal(outcome.infos[A]["action_mask"], outcome.legal_actions[A])
    # A terminates with its first move: its last info comes with the step it leaves in, beside
    # the info of B, who acts next.
    outcome = adapter.step({A: int(np.flatnonzero(outcome.legal_actions[A])[0])})
    assert set(outcome.infos) == {A, B} and set(outcome.observations) == {A, B}
