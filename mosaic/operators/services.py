"""ActorService, PolicyMappingService and MultiOperatorService.

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
from typing import TYPE_CHECKING, Any, Protocol, Self

from mosaic.operators.operator import ActorDescriptor, EpisodeSummary, Operator, StepSnapshot

if TYPE_CHECKING:
    from mosaic.operators.config import OperatorConfig

__all__ = [
    "LOG_SERVICE_ACTOR_SEED_ERROR",
    "ActorService",
    "MultiOperatorService",
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
            except Exception as exc:  # noqa: BLE001 - the table says: log and continue
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


class _Launcher(Protocol):
    def launch(self, config: OperatorConfig, run_id: str | None = None) -> Any: ...


class MultiOperatorService:
    """N operator worker subprocesses side by side, each with its own environment instance.

    Configurations are kept in the order they were added. ``start_all`` launches the ones not
    yet running; ``stop_all`` stops every running worker and always reaps it. Use it as a
    context manager to guarantee ``stop_all`` on the way out.
    """

    def __init__(
        self,
        launcher: _Launcher | None = None,
        *,
        run_id: str | None = None,
        stop_timeout: float = 5.0,
    ) -> None:
        self._launcher = launcher
        self._run_id = run_id
        self._stop_timeout = stop_timeout
        self._configs: dict[str, OperatorConfig] = {}
        self._handles: dict[str, Any] = {}

    def _get_launcher(self) -> _Launcher:
        if self._launcher is None:
            from mosaic.operators.launcher import OperatorLauncher

            self._launcher = OperatorLauncher()
        return self._launcher

    def add_operator(self, config: OperatorConfig) -> None:
        """Add ``config``; ``ValueError`` if its ``operator_id`` is already present."""
        if config.operator_id in self._configs:
            raise ValueError(f"operator {config.operator_id!r} was already added")
        self._configs[config.operator_id] = config

    def remove_operator(self, operator_id: str) -> int | None:
        """Remove ``operator_id`` (``KeyError`` if unknown), stopping its worker if it runs.

        Returns the worker's exit code, or ``None`` if it was not running.
        """
        if operator_id not in self._configs:
            raise KeyError(f"unknown operator id {operator_id!r}")
        code = self._stop_one(operator_id) if operator_id in self._handles else None
        del self._configs[operator_id]
        return code

    def get_active_operators(self) -> list[OperatorConfig]:
        """Every configured operator, in the order added."""
        return list(self._configs.values())

    def get_handle(self, operator_id: str) -> Any:
        """The running worker's handle; ``KeyError`` if it is not running."""
        return self._handles[operator_id]

    @property
    def handles(self) -> dict[str, Any]:
        """Running workers by operator id (a copy)."""
        return dict(self._handles)

    def start_all(self) -> dict[str, Any]:
        """Launch every configured operator that is not running yet, in order.

        If one launch fails, the workers this call started are stopped and the error
        propagates, so a failed ``start_all`` leaves no new process behind.
        """
        launcher = self._get_launcher()
        started: list[str] = []
        try:
            for operator_id, config in self._configs.items():
                if operator_id in self._handles:
                    continue
                self._handles[operator_id] = launcher.launch(config, run_id=self._run_id)
                started.append(operator_id)
        except BaseException:
            for operator_id in started:
                self._stop_one(operator_id)
            raise
        return dict(self._handles)

    def stop_all(self) -> dict[str, int | None]:
        """Stop every running worker, each within ``stop_timeout``; returns exit codes by id.

        Every worker is attempted even when stopping one of them fails (that failure is logged
        and its exit code reported as ``None``).
        """
        return {operator_id: self._stop_one(operator_id) for operator_id in list(self._handles)}

    def _stop_one(self, operator_id: str) -> int | None:
        handle = self._handles.pop(operator_id)
        try:
            code: int | None = handle.stop(timeout=self._stop_timeout)
        except Exception:  # noqa: BLE001 - keep stopping the others
            _log.exception("stopping operator %r failed", operator_id)
            return None
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()
