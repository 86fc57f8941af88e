"""A cheap PettingZoo parallel environment with many agents, for benchmarks/many_agents.py.

Every agent observes a Box(4) and acts with a Discrete(2) in every step; the environment's own
work per step is one NumPy update of all agents' states, so what a loop around it costs per
agent shows.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

#: The length of every episode, in steps (all agents are truncated together).
EPISODE_STEPS = 100


class Crowd(ParallelEnv[str, np.ndarray, int]):  # type: ignore[misc]
    """``agents`` agents (``agent_0``, ``agent_1``, ...), each drifting by its action; all
    truncated after :data:`EPISODE_STEPS` steps, with a reward of 1 each step."""

    metadata: ClassVar[dict[str, Any]] = {"name": "crowd_v0"}

    def __init__(self, agents: int = 32) -> None:
        if agents < 1:
            raise ValueError(f"agents must be at least 1, not {agents}")
        self.possible_agents = [f"agent_{index}" for index in range(agents)]
        self.agents: list[str] = []
        self._observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self._action_space = spaces.Discrete(2)
        self._state = np.zeros((agents, 4), dtype=np.float32)
        self._steps = 0
        self._rng = np.random.default_rng()
        self._rewards = dict.fromkeys(self.possible_agents, 1.0)
        self._flags = dict.fromkeys(self.possible_agents, False)
        self._infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._action_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._steps = 0
        self._state = self._rng.standard_normal(self._state.shape, dtype=np.float32)
        return self._observations(), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[
            dict[str, np.ndarray], dict[str, float], dict[str, bool], dict[str, bool],
            dict[str, dict[str, Any]]]:
        moves = np.fromiter((actions[agent] for agent in self.agents), dtype=np.float32,
                            count=len(self.agents))
        # A new array each step: the rows handed out before stay as they were.
        self._state = self._state * np.float32(0.9) + (moves - np.float32(0.5))[:, None]
        self._steps += 1
        truncated = self._steps >= EPISODE_STEPS
        observations = self._observations()
        truncations = dict.fromkeys(self.agents, True) if truncated else dict(self._flags)
        rewards, terminations, infos = dict(self._rewards), dict(self._flags), dict(self._infos)
        if truncated:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _observations(self) -> dict[str, np.ndarray]:
        return dict(zip(self.possible_agents, self._state, strict=True))
