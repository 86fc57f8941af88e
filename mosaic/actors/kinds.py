"""The component kinds that the conductors place in a thread or a process, by name."""

from __future__ import annotations

#: kind -> "module:Class". Only these kinds cross a process boundary; the names, not code,
#: travel on the command line of a component process (see mosaic.runtime.process_main).
PLACEABLE = {
    "environment": "mosaic.actors.environment:EnvironmentActor",
    "muscle": "mosaic.actors.muscle:MuscleActor",
    "brain": "mosaic.actors.brain:BrainActor",
    "rollout": "mosaic.orchestration.rollout_worker:RolloutWorker",
}


def component_path(kind: str) -> str:
    """The class path of ``kind``'s component; :class:`ValueError` for an unknown kind."""
    try:
        return PLACEABLE[kind]
    except KeyError:
        raise ValueError(f"unknown component kind {kind!r}; known: {sorted(PLACEABLE)}") from None
