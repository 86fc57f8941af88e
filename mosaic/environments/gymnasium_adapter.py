"""Gymnasium environments: one slot, ``agent_0``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium

from mosaic.environments.adapter import EnvironmentAdapter, Outcome

#: The slot id of a Gymnasium environment's only agent.
GYMNASIUM_SLOT = "agent_0"
_ACTING = (GYMNASIUM_SLOT,)
_NO_REWARDS: dict[str, float] = {}


def _mask(info: Mapping[str, Any]) -> dict[str, Any]:
    mask = info.get("action_mask")
    return {} if mask is None else {GYMNASIUM_SLOT: mask}


def _infos(info: Mapping[str, Any]) -> dict[str, Any]:
    return {GYMNASIUM_SLOT: info} if info else {}


class GymnasiumAdapter(EnvironmentAdapter):
    """Wraps a ``gymnasium.Env``; ``info["action_mask"]``, when present, becomes the legal
    actions."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        self.env = env
        self.slots = {GYMNASIUM_SLOT: (env.observation_space, env.action_space)}
        self._closed = False

    def reset(self, seed: int | None) -> Outcome:
        observation, info = self.env.reset(seed=seed)
        return Outcome({GYMNASIUM_SLOT: observation}, _NO_REWARDS, False, False, _ACTING,
                       _mask(info), _infos(info))

    def step(self, actions: Mapping[str, Any]) -> Outcome:
        observation, reward, terminated, truncated, info = self.env.step(actions[GYMNASIUM_SLOT])
        if not info:  # most steps of most environments: no mask, no info to pass on
            return Outcome({GYMNASIUM_SLOT: observation}, {GYMNASIUM_SLOT: float(reward)},
                           bool(terminated), bool(truncated), _ACTING, {}, {})
        return Outcome({GYMNASIUM_SLOT: observation}, {GYMNASIUM_SLOT: float(reward)},
                       bool(terminated), bool(truncated), _ACTING, _mask(info), _infos(info))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.env.close()
