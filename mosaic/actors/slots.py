"""Rebuilding slots (sensor + actuator spaces) from what travelled on the wire."""

from __future__ import annotations

from collections.abc import Iterable

from mosaic.agents.context import Slot
from mosaic.core.spaces import space_from_dict
from mosaic.messages import ActuatorSpec, SensorSpec


def slots_from_specs(
    sensors: Iterable[SensorSpec], actuators: Iterable[ActuatorSpec]
) -> dict[str, Slot]:
    """Pair each sensor with the actuator of the same slot id."""
    action_spaces = {a.uid: space_from_dict(a.space) for a in actuators}
    return {s.uid: Slot(s.uid, space_from_dict(s.space), action_spaces[s.uid]) for s in sensors}
