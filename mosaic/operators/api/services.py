"""ActorService and PolicyMappingService (MultiOperatorService is in
:mod:`mosaic.operators.driver`).

Error handling follows one table, and every row is a promise:

=================================== ==========================================================
failure                             behaviour
=================================== ==========================================================
``select_action`` raises            the exception propagates to the caller; the caller aborts
                                    the episode
``on_step`` raises                  the exception propagates to the caller; the caller aborts
                                    the episode
``seed(n)`` raises                  caught and logged as ``LOG_SERVICE_ACTOR_SEED_ERROR``; the
                                    broadcast continues with the remaining actors
``set_active_actor`` unknown id     ``KeyError`` at once, to surface misconfiguration
=================================== ==========================================================
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from mosaic.operators.api.operator import ActorDescriptor, EpisodeSummary, Operator, StepSnapshot

__all__ = [
    "LOG_SERVICE_ACTOR_SEED_ERROR",
    "ActorService",
    "OperatorService",
    "PolicyMappingService",
]

_log = logging.getLogger(__name__)

#: Log event name for an actor whose ``seed`` raised during a broadcast.
LOG_SERVICE_ACTOR_SEED_ERROR = "LOG_SERVICE_ACTOR_SEED_ERROR"


class ActorService:
    """The registry of actors (operators) and the one that is active.

    Only the active actor receives ``select_action``, ``notify_step`` and
    ``notify_episode_end``; ``seed`` reaches every registered actor. Switching the active actor
    never restarts anything. Not thread-safe: use it from the thread that drives the episode.
    """

    def __init__(self) -> None:
        self._actors: dict[str, Operator] = {}
        self._descriptors: dict[str, ActorDescriptor] = {}
        self._active_actor_id: str | None = None

    # -- registration -------------------------------------------------------------------------

    def register_actor(
        self,
        actor: Operator,
        *,
        display_name: str | None = None,
        description: str = "",
        policy_label: str = "",
        backend_label: str = "",
        activate: bool = True,
    ) -> ActorDescriptor:
        """Register ``actor`` under ``actor.id`` and return its descriptor.

        ``activate=True`` (the default) makes the new actor the active one, so the first actor
        registered is active unless it was registered with ``activate=False``; a later
        registration with the default switches to the new actor, and ``activate=False`` adds it
        without switching. ``display_name`` defaults to ``actor.name``.

        Raises ``TypeError`` if ``actor`` is not an Operator and ``ValueError`` if its id is
        already registered; the registry is unchanged in both cases.
        """
        if not isinstance(actor, Operator):
            raise TypeError(
                f"{type(actor).__name__} is not an Operator: it needs id, name, select_action, "
                "reset and on_step_result"
            )
        actor_id = actor.id
        if actor_id in self._actors:
            raise ValueError(f"an actor with id {actor_id!r} is already registered")
        descriptor = ActorDescriptor(
            actor_id=actor_id,
            display_name=display_name if display_name is not None else actor.name,
            policy_label=policy_label,
            backend_label=backend_label,
            description=description,
        )
        self._actors[actor_id] = actor
        self._descriptors[actor_id] = descriptor
        if activate:
            self._active_actor_id = actor_id
        return descriptor

    def unregister_actor(self, actor_id: str) -> None:
        """Forget ``actor_id`` (``KeyError`` if unknown); if it was active, none is active."""
        del self._actors[actor_id]
        del self._descriptors[actor_id]
        if self._active_actor_id == actor_id:
            self._active_actor_id = None

    def set_active_actor(self, actor_id: str) -> None:
        """Make ``actor_id`` the active actor. ``KeyError`` immediately if it is unknown."""
        if actor_id not in self._actors:
            known = ", ".join(sorted(self._actors)) or "none"
            raise KeyError(f"unknown actor id {actor_id!r} (registered: {known})")
        self._active_actor_id = actor_id

    # -- queries ------------------------------------------------------------------------------

    @property
    def active_actor_id(self) -> str | None:
        """The id of the active actor, or ``None`` when none is."""
        return self._active_actor_id

    def get_active_actor(self) -> Operator:
        """The active actor; ``LookupError`` when none is active."""
        if self._active_actor_id is None:
            raise LookupError("no actor is active: register one or call set_active_actor")
        return self._actors[self._active_actor_id]

    def get_actor(self, actor_id: str) -> Operator:
        """The actor registered as ``actor_id``; ``KeyError`` if unknown."""
        return self._actors[actor_id]

    def get_descriptor(self, actor_id: str) -> ActorDescriptor:
        """The descriptor of ``actor_id``; ``KeyError`` if unknown."""
        return self._descriptors[actor_id]

    def get_descriptors(self) -> list[ActorDescriptor]:
        """Every descriptor, in registration order."""
        return list(self._descriptors.values())

    def actor_ids(self) -> list[str]:
        """Every registered id, in registration order."""
        return list(self._actors)

    def __contains__(self, actor_id: object) -> bool:
        return actor_id in self._actors

    def __len__(self) -> int:
        return len(self._actors)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._actors))

    # -- the episode loop ---------------------------------------------------------------------

    def seed(self, n: int) -> None:
        """Call ``seed(n)`` on every registered actor that has it, active or not.

        An actor without ``seed`` is skipped silently. An actor whose ``seed`` raises is logged
        (event ``LOG_SERVICE_ACTOR_SEED_ERROR``, with the traceback) and the broadcast goes on;
        this method itself does not raise for it.
        """
        for actor_id, actor in list(self._actors.items()):
            seed_fn = getattr(actor, "seed", None)
            if not callable(seed_fn):
                continue
            try:
                seed_fn(n)
            except Exception as exc:  # the table says: log and continue
                _log.error(
                    "%s: actor %r failed to seed with %d: %s",
                    LOG_SERVICE_ACTOR_SEED_ERROR,
                    actor_id,
                    n,
                    exc,
                    exc_info=True,
                    extra={"event": LOG_SERVICE_ACTOR_SEED_ERROR, "actor_id": actor_id, "seed": n},
                )

    def select_action(self, snapshot: StepSnapshot) -> Any:
        """Ask the active actor for an action on ``snapshot``.

        Returns the actor's answer unchanged. ``None`` means a no-op: the caller applies the
        environment's no-op action (typically action 0, or the environment's own default) and
        this service does not invent one. Whatever the actor raises propagates and the caller
        aborts the episode. ``LookupError`` when no actor is active.
        """
        actor = self.get_active_actor()
        return actor.select_action(snapshot.observation, snapshot.legal_actions)

    def notify_step(self, snapshot: StepSnapshot) -> None:
        """Hand ``snapshot`` to the active actor after the environment stepped.

        Calls the actor's ``on_step(snapshot)`` when it has one, otherwise
        ``on_step_result(observation, action, reward, terminated, truncated)``. Whatever it
        raises propagates and the caller aborts the episode.
        """
        actor = self.get_active_actor()
        on_step = getattr(actor, "on_step", None)
        if callable(on_step):
            on_step(snapshot)
        else:
            actor.on_step_result(
                snapshot.observation,
                snapshot.action,
                snapshot.reward,
                snapshot.terminated,
                snapshot.truncated,
            )

    def notify_episode_end(self, summary: EpisodeSummary) -> None:
        """Hand ``summary`` to the active actor's ``on_episode_end``, if it has one.

        Skipped silently when no actor is active or the hook is missing; an exception from the
        hook propagates.
        """
        if self._active_actor_id is None:
            return
        hook = getattr(self._actors[self._active_actor_id], "on_episode_end", None)
        if callable(hook):
            hook(summary)


#: The name seed 001 uses for the same registry.
OperatorService = ActorService


class PolicyMappingService:
    """Which actor plays which agent in a multi-agent game."""

    def __init__(self, mapping: Mapping[str, str] | None = None) -> None:
        self._mapping: dict[str, str] = dict(mapping or {})

    def set_mapping(self, agent_id: str, actor_id: str) -> None:
        """Map ``agent_id`` to ``actor_id``, replacing any earlier mapping for that agent.

        The actor id is checked when it is used (``select_action_for``), not here, so a
        mapping may be written before its actor is registered.
        """
        self._mapping[agent_id] = actor_id

    def remove_mapping(self, agent_id: str) -> None:
        """Forget ``agent_id``'s mapping; ``KeyError`` if it has none."""
        del self._mapping[agent_id]

    def get_actor_id(self, agent_id: str) -> str:
        """The actor mapped to ``agent_id``; ``KeyError`` immediately if it has none."""
        try:
            return self._mapping[agent_id]
        except KeyError:
            known = ", ".join(sorted(self._mapping)) or "none"
            raise KeyError(f"no actor is mapped to agent {agent_id!r} (mapped: {known})") from None

    def mappings(self) -> dict[str, str]:
        """A copy of the whole agent -> actor mapping."""
        return dict(self._mapping)

    def select_action_for(
        self, agent_id: str, snapshot: StepSnapshot, actor_service: ActorService
    ) -> Any:
        """Activate the actor mapped to ``agent_id`` in ``actor_service``, then select with it.

        ``KeyError`` if the agent is unmapped or the mapped actor is not registered (the active
        actor is then unchanged). Otherwise the same promises as
        :meth:`ActorService.select_action`, including ``None`` as a no-op.
        """
        actor_service.set_active_actor(self.get_actor_id(agent_id))
        return actor_service.select_action(snapshot)
