"""The Operator protocol, the records that flow through it, and the in-process operators.

An operator answers one question: given an observation, which action? Anything with ``id``,
``name``, ``select_action``, ``reset`` and ``on_step_result`` is an operator; no base class is
needed. ``seed``, ``on_step`` and ``on_episode_end`` are optional hooks that
:class:`mosaic.operators.api.services.ActorService` calls when they exist.

``None`` returned by ``select_action`` means "no action of my own": the caller applies the
environment's no-op (see :meth:`mosaic.operators.api.services.ActorService.select_action`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import gymnasium

__all__ = [
    "BUILTIN_OPERATORS",
    "ActorDescriptor",
    "EpisodeSummary",
    "Operator",
    "PassiveOperator",
    "RandomOperator",
    "ScriptedOperator",
    "StepSnapshot",
    "WorkerOperator",
]


@runtime_checkable
class Operator(Protocol):
    """Any decision-maker: human, LLM, RL policy, BDI agent or baseline.

    ``isinstance(x, Operator)`` checks only that the members exist, not their signatures.
    Optional hooks, called when present: ``seed(n: int) -> None``,
    ``on_step(snapshot: StepSnapshot) -> None`` and ``on_episode_end(summary: EpisodeSummary)``.
    """

    @property
    def id(self) -> str:
        """A stable identifier, unique within one ActorService."""
        ...

    @property
    def name(self) -> str:
        """A human-readable name."""
        ...

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        """Return an action for ``observation``, or ``None`` for the environment's no-op.

        When ``legal_actions`` is given the action must be one of them. An exception aborts the
        episode (the caller does not retry).
        """
        ...

    def reset(self, seed: int | None = None) -> None:
        """Forget per-episode state; re-seed internal randomness when ``seed`` is given."""
        ...

    def on_step_result(
        self,
        observation: Any,
        action: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
    ) -> None:
        """Receive the environment's answer to the action this operator chose."""
        ...


@dataclass(frozen=True, slots=True)
class StepSnapshot:
    """What the evaluation loop knows at one step of one episode.

    ``action`` is the action that led to this snapshot (``None`` right after a reset);
    ``step_index`` counts from 0 within the episode; ``agent_id`` names the acting agent in a
    multi-agent game and is ``None`` in a single-agent one; ``seed`` is the episode's reset seed.
    """

    step_index: int
    observation: Any
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)
    agent_id: str | None = None
    action: Any = None
    legal_actions: Sequence[Any] | None = None
    episode_index: int = 0
    seed: int | None = None

    @property
    def done(self) -> bool:
        """True when the episode ended at this step (terminated or truncated)."""
        return self.terminated or self.truncated


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    """The outcome of one finished episode, handed to ``on_episode_end``."""

    episode_index: int
    total_reward: float
    steps: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ActorDescriptor:
    """Display metadata for one registered actor. It never influences action selection."""

    actor_id: str
    display_name: str
    policy_label: str = ""
    backend_label: str = ""
    description: str = ""


def _plain(value: Any) -> Any:
    """NumPy scalars become Python scalars so that actions serialise to JSON unchanged."""
    return value.item() if isinstance(value, np.generic) else value


class NamedOperator:
    """The identity every built-in operator has: ``id`` and ``name``, set by the subclass's
    ``__init__`` as ``_id`` and ``_name``."""

    _id: str
    _name: str

    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        return self._name


class RandomOperator(NamedOperator):
    """Uniformly random actions from ``action_space``, reproducible from ``seed``.

    The operator samples from its own copy of the space, so sharing the space object with an
    environment or another operator does not disturb either random stream. The same seed gives
    the same action sequence; ``reset(seed)`` and ``seed(n)`` restart the stream from ``n``.
    With ``legal_actions`` it picks uniformly among them instead.
    """

    def __init__(
        self,
        action_space: gymnasium.Space[Any],
        seed: int | None = None,
        *,
        operator_id: str = "random",
        name: str = "Random",
    ) -> None:
        self._id = operator_id
        self._name = name
        self._space = copy.deepcopy(action_space)
        self._space.seed(seed)

    def seed(self, n: int) -> None:
        """Restart the random stream from ``n``."""
        self._space.seed(n)

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        if legal_actions is not None:
            if len(legal_actions) == 0:
                raise ValueError(f"operator {self._id}: legal_actions is empty")
            index = int(self._space.np_random.integers(len(legal_actions)))
            return _plain(legal_actions[index])
        return _plain(self._space.sample())

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._space.seed(seed)

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        return None


class PassiveOperator(NamedOperator):
    """Always answers ``None``: the caller applies the environment's no-op action.

    This is the shape of a placeholder actor whose real loop runs elsewhere (a worker
    subprocess that steps its own environment).
    """

    def __init__(self, *, operator_id: str = "passive", name: str = "Passive") -> None:
        self._id = operator_id
        self._name = name

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> None:
        return None

    def reset(self, seed: int | None = None) -> None:
        return None

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        return None


class ScriptedOperator(NamedOperator):
    """Actions from a plain function ``fn(observation, legal_actions) -> action``.

    Whatever ``fn`` raises propagates unchanged (and so aborts the episode).
    """

    def __init__(
        self,
        fn: Callable[[Any, Sequence[Any] | None], Any],
        *,
        operator_id: str = "scripted",
        name: str | None = None,
    ) -> None:
        self._fn = fn
        self._id = operator_id
        self._name = name if name is not None else getattr(fn, "__name__", "scripted")

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        return self._fn(observation, legal_actions)

    def reset(self, seed: int | None = None) -> None:
        return None

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        return None


#: The in-process operators a file names by a word (an ``OperatorMuscle``'s ``class``), each
#: made from the slot's action space, a seed, a ``scripted`` operator's function (else None),
#: and the operator's ``operator_id`` and ``name``.
BUILTIN_OPERATORS: Mapping[str, Callable[..., Operator]] = {
    "random": lambda space, seed, _fn, **names: RandomOperator(space, seed, **names),
    "passive": lambda _space, _seed, _fn, **names: PassiveOperator(**names),
    "scripted": lambda _space, _seed, fn, **names: ScriptedOperator(fn, **names),
}


class WorkerOperator(NamedOperator):
    """An agent-mode worker subprocess behind the Operator protocol.

    In agent mode the caller owns the environment and the worker only chooses actions: the
    first use sends ``init_agent`` for ``player_id``, ``reset(seed)`` / ``seed(n)`` send
    ``reset`` (which re-seeds the worker's policy), and ``select_action`` sends
    ``select_action`` with the observation (NumPy arrays are sent as lists) and returns the
    ``action`` of the ``action_selected`` reply.

    Every call waits at most ``timeout`` seconds and raises the handle's errors unchanged:
    ``WorkerTimeout`` (silent), ``WorkerCrashed`` (exited), ``WorkerProtocolError`` (garbage)
    or another ``WorkerError`` (an ``error`` reply); from ``select_action`` each of them aborts
    the episode. The worker process belongs to whoever launched it, who also stops it.
    """

    def __init__(
        self,
        handle: Any,
        *,
        operator_id: str | None = None,
        name: str | None = None,
        player_id: str = "agent_0",
        settings: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._handle = handle
        self._id = operator_id or str(getattr(handle, "operator_id", "worker"))
        self._name = name or self._id
        self._player_id = player_id
        self._settings = dict(settings) if settings is not None else None
        self._timeout = timeout
        self._initialised = False

    def _ensure_initialised(self) -> None:
        if not self._initialised:
            self._handle.init_agent(self._player_id, settings=self._settings,
                                    timeout=self._timeout)
            self._initialised = True

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode in the worker, re-seeding its policy when ``seed`` is given."""
        self._ensure_initialised()
        self._handle.reset(seed, timeout=self._timeout)

    def seed(self, n: int) -> None:
        """Re-seed the worker's policy (same as ``reset(n)``)."""
        self.reset(n)

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        self._ensure_initialised()
        reply = self._handle.select_action(
            observation,
            legal_actions=list(legal_actions) if legal_actions is not None else None,
            player_id=self._player_id,
            timeout=self._timeout,
        )
        return reply["action"]

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        return None
