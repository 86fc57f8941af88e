"""Experiment files: the YAML a user writes, validated into an :class:`Experiment`.

:func:`load_experiment` reads a file and returns a frozen :class:`Experiment`, or raises
:class:`~mosaic.core.errors.ConfigError` listing every problem found. :meth:`Experiment.run_config`
gives each run its configuration as plain data.

The names are loaded on first use: a command must not pay for pydantic and the schema before
it needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mosaic.experiment.loader import format_location, load_experiment
    from mosaic.experiment.schema import (
        AgentConfig,
        AgentPlacement,
        BrainSpec,
        EnvironmentConfig,
        Experiment,
        ExperimentFile,
        MuscleSpec,
        Placement,
        StoreConfig,
        Timeouts,
        Transport,
    )

_HOMES = {
    "format_location": "loader", "load_experiment": "loader",
    **{name: "schema" for name in ("AgentConfig", "AgentPlacement", "BrainSpec",
                                   "EnvironmentConfig", "Experiment", "ExperimentFile",
                                   "MuscleSpec", "Placement", "StoreConfig", "Timeouts",
                                   "Transport")},
}

__all__ = [
    "AgentConfig", "AgentPlacement", "BrainSpec", "EnvironmentConfig", "Experiment",
    "ExperimentFile", "MuscleSpec", "Placement", "StoreConfig", "Timeouts",
    "Transport", "format_location", "load_experiment",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mosaic.experiment' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"mosaic.experiment.{home}"), name)
    globals()[name] = value
    return value
