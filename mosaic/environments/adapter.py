"""The environment side of the step loop, whatever library the environment comes from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from mosaic.core.frozen import fast_init


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one reset or step produced, keyed by the environment's agent ids ("slots").

    ``acting`` lists the slots that must act next; ``legal_actions`` holds action masks for the
    slots whose environment provides one; ``infos`` holds the environment's ``info`` for the
    slots it gave one (as it gave it: the environment actor keeps what the codec carries, see
    :mod:`mosaic.environments.info`).
    """

    observations: dict[str, Any]
    rewards: dict[str, float]
    terminated: bool
    truncated: bool
    acting: tuple[str, ...]
    legal_actions: dict[str, Any]
    infos: dict[str, Any] = field(default_factory=dict)


fast_init(Outcome)  # one a step: the plain frozen __init__ is most of what building it costs


class EnvironmentAdapter:
    """One environment instance seen as slots with sensors (observation spaces) and actuators.

    Implementations wrap a library's environment; the environment actor calls them from its own
    thread only.
    """

    #: slot -> (observation space, action space); the environment's own space objects.
    slots: Mapping[str, tuple[gymnasium.Space[Any], gymnasium.Space[Any]]]

    def reset(self, seed: int | None) -> Outcome:
        """Start an episode, seeding the environment when ``seed`` is given."""
        raise NotImplementedError

    def step(self, actions: Mapping[str, Any]) -> Outcome:
        """Apply one action per acting slot."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the environment. Idempotent."""
        raise NotImplementedError
