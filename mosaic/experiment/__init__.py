"""Experiment files: the YAML a user writes, validated into an :class:`Experiment`.

:func:`load_experiment` reads a file and returns a frozen :class:`Experiment`, or raises
:class:`~mosaic.core.errors.ConfigError` listing every problem found. :meth:`Experiment.run_config`
gives each run its configuration as plain data.

The names are loaded on first use: a command must not pay for pydantic and the schema before
it needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic.core.lazy import lazy_names

if TYPE_CHECKING:
    from mosaic.experiment.loader import (
        check_experiment,
        experiment_from_data,
        format_location,
        load_experiment,
    )
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
        SweepPoint,
        Timeouts,
        Transport,
    )

_HOMES = {
    "check_experiment": "mosaic.experiment.loader",
    "experiment_from_data": "mosaic.experiment.loader",
    "format_location": "mosaic.experiment.loader",
    "load_experiment": "mosaic.experiment.loader",
    **dict.fromkeys(("AgentConfig", "AgentPlacement", "BrainSpec", "EnvironmentConfig",
                     "Experiment", "ExperimentFile", "MuscleSpec", "Placement", "StoreConfig",
                     "SweepPoint", "Timeouts", "Transport"), "mosaic.experiment.schema"),
}

__all__ = [
    "AgentConfig", "AgentPlacement", "BrainSpec", "EnvironmentConfig", "Experiment",
    "ExperimentFile", "MuscleSpec", "Placement", "StoreConfig", "SweepPoint", "Timeouts",
    "Transport", "check_experiment", "experiment_from_data", "format_location",
    "load_experiment",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
