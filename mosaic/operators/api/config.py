"""What an operator is and how to launch it: :class:`OperatorConfig` and :class:`WorkerAssignment`.

Both are frozen dataclasses, validated on construction, so a bad configuration fails where it is
written rather than when a worker subprocess starts. ``settings`` holds the type-specific options
that :class:`mosaic.operators.driver.launcher.OperatorLauncher` turns into worker command-line
flags; each type's keys are the fields of its model in
:data:`mosaic.operators.api.settings.SETTINGS_MODELS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mosaic.operators.api.kinds import BUILTIN_KINDS, kind_names, operator_kinds

__all__ = ["OPERATOR_TYPES", "OperatorConfig", "WorkerAssignment"]

#: mosaic's own operator types (:mod:`mosaic.operators.api.kinds` has them all, with those that
#: installed packages add). ``command`` runs a third-party worker given as an argv.
OPERATOR_TYPES: tuple[str, ...] = tuple(BUILTIN_KINDS)


def _check_type(kind: str, what: str) -> None:
    if kind not in operator_kinds():
        raise ValueError(f"{what} must be {kind_names()}; got {kind!r}")


def _as_command(command: Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    if command is None:
        return None
    if isinstance(command, str):
        raise ValueError(f"{what} must be a sequence of argv strings, not one string: {command!r}")
    argv = tuple(command)
    if not argv or not all(isinstance(part, str) and part for part in argv):
        raise ValueError(f"{what} must be a non-empty sequence of non-empty strings; got {argv!r}")
    return argv


def _as_settings(settings: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise ValueError(f"{what} must be a mapping; got {type(settings).__name__}")
    bad = [key for key in settings if not isinstance(key, str)]
    if bad:
        raise ValueError(f"{what} keys must be strings; got {bad!r}")
    return dict(settings)


@dataclass(frozen=True)
class WorkerAssignment:
    """Which worker plays one player of a multi-agent operator.

    ``worker_type`` is one of :data:`OPERATOR_TYPES`; ``settings`` are the type-specific options
    (same keys as :attr:`OperatorConfig.settings`); ``command`` is the argv of a third-party
    worker and is required when ``worker_type == "command"``.

    Raises ``ValueError`` on an unknown type or a missing or malformed command.
    """

    worker_id: str
    worker_type: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check_type(self.worker_type, "WorkerAssignment.worker_type")
        object.__setattr__(
            self, "settings", _as_settings(self.settings, "WorkerAssignment.settings")
        )
        object.__setattr__(self, "command", _as_command(self.command, "WorkerAssignment.command"))
        if self.worker_type == "command" and self.command is None:
            raise ValueError(
                f"worker {self.worker_id!r} has worker_type 'command' but no command argv"
            )


@dataclass(frozen=True)
class OperatorConfig:
    """Everything needed to launch and control one operator.

    A single-agent operator runs one worker that owns its Gymnasium environment (``task`` is the
    environment id, e.g. ``CartPole-v1``). A multi-agent operator has ``worker_assignments``, one
    per player id; its workers do not own an environment (the driver does), and each assignment
    carries its own worker type. For a multi-agent config ``operator_type`` is the first
    assignment's type unless given, and is informational only.

    ``max_steps`` of 0 means no step limit beyond the environment's own. ``run_id`` is normally
    empty and assigned at launch. ``settings`` is copied into a plain dict; treat it as read-only.

    Construction raises ``ValueError`` for an unknown ``operator_type``, an empty
    ``operator_id``, a negative ``max_steps``, a ``command`` type without a command, or
    assignments that are not :class:`WorkerAssignment` instances.
    """

    operator_id: str
    operator_type: str
    worker_id: str
    display_name: str
    env_name: str
    task: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    run_id: str = ""
    max_steps: int = 0
    worker_assignments: Mapping[str, WorkerAssignment] = field(default_factory=dict)
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.operator_id, str) or not self.operator_id:
            raise ValueError(f"operator_id must be a non-empty string; got {self.operator_id!r}")
        _check_type(self.operator_type, f"operator {self.operator_id!r}: operator_type")
        if not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool):
            raise ValueError(f"operator {self.operator_id!r}: max_steps must be an int")
        if self.max_steps < 0:
            raise ValueError(
                f"operator {self.operator_id!r}: max_steps must be >= 0 (0 = unlimited); "
                f"got {self.max_steps}"
            )
        where = f"operator {self.operator_id!r}"
        object.__setattr__(self, "settings", _as_settings(self.settings, f"{where}: settings"))
        object.__setattr__(
            self, "command", _as_command(self.command, f"operator {self.operator_id!r}: command")
        )
        assignments = dict(self.worker_assignments or {})
        for player, assignment in assignments.items():
            if not isinstance(player, str) or not player:
                raise ValueError(f"operator {self.operator_id!r}: player ids must be strings")
            if not isinstance(assignment, WorkerAssignment):
                raise ValueError(
                    f"operator {self.operator_id!r}: assignment for {player!r} must be a "
                    f"WorkerAssignment; got {type(assignment).__name__}"
                )
        object.__setattr__(self, "worker_assignments", assignments)
        if self.operator_type == "command" and self.command is None and not assignments:
            raise ValueError(
                f"operator {self.operator_id!r} has operator_type 'command' but no command argv"
            )

    @property
    def is_multi_agent(self) -> bool:
        """True when the operator has one worker per player (``worker_assignments``)."""
        return bool(self.worker_assignments)

    def with_run_id(self, run_id: str) -> OperatorConfig:
        """A copy of this config with ``run_id`` set."""
        return dataclasses.replace(self, run_id=run_id)

    @classmethod
    def single_agent(
        cls,
        operator_id: str,
        operator_type: str,
        worker_id: str,
        display_name: str,
        env_name: str,
        task: str,
        settings: Mapping[str, Any] | None = None,
        *,
        run_id: str = "",
        max_steps: int = 0,
        command: Sequence[str] | None = None,
    ) -> OperatorConfig:
        """A one-worker operator whose worker owns the environment ``task``."""
        return cls(
            operator_id=operator_id,
            operator_type=operator_type,
            worker_id=worker_id,
            display_name=display_name,
            env_name=env_name,
            task=task,
            settings=dict(settings or {}),
            run_id=run_id,
            max_steps=max_steps,
            command=tuple(command) if command is not None else None,
        )

    @classmethod
    def multi_agent(
        cls,
        operator_id: str,
        display_name: str,
        env_name: str,
        task: str,
        worker_assignments: Mapping[str, WorkerAssignment],
        settings: Mapping[str, Any] | None = None,
        *,
        operator_type: str | None = None,
        worker_id: str = "multi_agent",
        run_id: str = "",
        max_steps: int = 0,
    ) -> OperatorConfig:
        """An operator with one worker per player; the driver owns the environment ``task``.

        Raises ``ValueError`` when ``worker_assignments`` is empty.
        """
        if not worker_assignments:
            raise ValueError(f"operator {operator_id!r}: multi_agent needs worker_assignments")
        first = next(iter(worker_assignments.values()))
        kind = operator_type if operator_type is not None else getattr(first, "worker_type", "")
        return cls(
            operator_id=operator_id,
            operator_type=kind,
            worker_id=worker_id,
            display_name=display_name,
            env_name=env_name,
            task=task,
            settings=dict(settings or {}),
            run_id=run_id,
            max_steps=max_steps,
            worker_assignments=dict(worker_assignments),
        )
