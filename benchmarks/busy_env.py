"""CartPole whose every step burns a fixed amount of CPU, as a heavier simulator would."""

from __future__ import annotations

import time
from typing import Any

from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class BusyCartPole(CartPoleEnv):
    """CartPole-v1's dynamics, plus ``busy_ms`` of CPU time spent in every ``step``."""

    def __init__(self, busy_ms: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.busy_s = busy_ms / 1000.0

    def step(self, action: Any) -> Any:
        until = time.process_time() + self.busy_s
        while time.process_time() < until:
            pass
        observation, reward, terminated, truncated, info = super().step(action)
        # CartPole-v1's limit, which the bare class does not apply.
        self._steps = getattr(self, "_steps", 0) + 1
        if self._steps >= 500:
            truncated = True
        return observation, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self._steps = 0
        return super().reset(seed=seed, options=options)
