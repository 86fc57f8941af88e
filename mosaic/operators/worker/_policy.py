"""What a worker program implements: the policy protocol, its base class, and action helpers."""

from __future__ import annotations

import copy
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class WorkerPolicy(Protocol):
    """What the runtime needs from a policy. Optional extras are listed on :class:`BasePolicy`."""

    def reset(self, seed: int | None) -> None:
        """A new episode starts; seed all randomness from ``seed`` (None = unseeded)."""

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """The action for ``observation``; ``None`` means the no-op action."""

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        """The outcome of the last action (only in ``reset``/``step`` mode)."""


class BasePolicy:
    """Defaults for a worker policy. Subclass and implement :meth:`select_action`.

    ``reproducible`` is the worker's claim that the same seed gives the same actions; it is sent
    in ``ready`` and ``agent_ready`` replies and checked by the conformance checker.
    """

    reproducible: bool = False

    def reset(self, seed: int | None) -> None:
        """Seed the policy for a new episode."""

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """Return an action; subclasses must implement it."""
        raise NotImplementedError(f"{type(self).__name__} must implement select_action()")

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        """Receive the outcome of the last action."""

    def init_agent(
        self, player_id: str, env_name: str | None, task: str | None, settings: dict[str, Any]
    ) -> None:
        """The driver assigned this worker to ``player_id`` (``init_agent`` command)."""

    def reply_fields(self) -> dict[str, Any]:
        """Extra fields for the ``step`` / ``action_selected`` reply of the last action."""
        return {}

    def close(self) -> None:
        """Release resources; called once when the worker exits, also on SIGTERM."""


# --- action helpers -------------------------------------------------------------------------------


def discrete_actions(action_space: Any) -> list[int] | None:
    """All actions of a ``Discrete`` space as a list, or None for other spaces."""
    from gymnasium import spaces

    if isinstance(action_space, spaces.Discrete):
        start = int(action_space.start)
        return list(range(start, start + int(action_space.n)))
    return None


def noop_action(action_space: Any, legal_actions: list[int] | None = None) -> Any:
    """The do-nothing action: 0 if legal (else the first legal action), or the space's origin.

    For a ``Discrete`` space that is its ``start``; for ``Box`` zeros clipped to the bounds; for
    ``MultiDiscrete`` its ``start``; for ``MultiBinary`` zeros. Raises ``ValueError`` when there
    is neither a legal-action list nor a known space.
    """
    from gymnasium import spaces

    if legal_actions:
        return 0 if 0 in legal_actions else legal_actions[0]
    if isinstance(action_space, spaces.Discrete):
        return int(action_space.start)
    if isinstance(action_space, spaces.Box):
        zero = np.zeros(action_space.shape, dtype=action_space.dtype)
        return np.clip(zero, action_space.low, action_space.high)
    if isinstance(action_space, spaces.MultiDiscrete):
        return np.asarray(action_space.start).copy()
    if isinstance(action_space, spaces.MultiBinary):
        return np.zeros(action_space.shape, dtype=action_space.dtype)
    raise ValueError(
        f"no no-op action known for action space {action_space!r} and no legal actions given"
    )


def copy_space(action_space: Any, seed: int | None) -> Any:
    """A private, seeded copy of ``action_space`` for sampling without touching the original."""
    space = copy.deepcopy(action_space)
    space.seed(seed)
    return space
