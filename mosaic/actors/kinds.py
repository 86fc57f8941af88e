"""The component kinds that can be placed in a thread or a process, by name."""

from __future__ import annotations

import importlib

from mosaic.actors.component import Component

#: kind -> "module:Class". Only these kinds cross a process boundary; the names, not code,
#: travel on the command line of a component process.
PLACEABLE = {
    "environment": "mosaic.actors.environment:EnvironmentActor",
    "muscle": "mosaic.actors.muscle:MuscleActor",
    "brain": "mosaic.actors.brain:BrainActor",
}


def make_component(kind: str, uid: str) -> Component:
    """Build an idle component of ``kind``; it is configured later by its setup message."""
    try:
        target = PLACEABLE[kind]
    except KeyError:
        raise ValueError(f"unknown component kind {kind!r}; known: {sorted(PLACEABLE)}") from None
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    component: Component = cls(uid)
    return component
