"""mosaic: multi-agent experiments over ZeroMQ.

What a user writes against, in one place:

* agents: :class:`Brain` (learns) and :class:`Muscle` (acts), their contexts and the built-in
  :class:`NoOpBrain` and :class:`RandomMuscle`;
* environments: the :class:`EnvironmentAdapter` contract and :func:`make_environment`;
* operators: the :class:`Operator` protocol;
* experiments: :func:`load_experiment` and :class:`Experiment`, and :func:`run`, which runs one
  (with overrides of its keys) as ``mosaic experiment-start`` does and returns :class:`Results`;
* results: :func:`open_store` and :class:`Store`;
* errors: :class:`MosaicError`, the base of every error mosaic raises, and :class:`ConfigError`.

Everything else lives in the subpackages, one layer each (see the README's layout table). The
names load on first use: a component process imports ``mosaic`` too, and must not pay for
pydantic or SQLAlchemy at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic.core.lazy import lazy_names

if TYPE_CHECKING:
    from mosaic.agents import (
        Brain,
        BrainContext,
        Mode,
        Muscle,
        MuscleContext,
        NoOpBrain,
        RandomMuscle,
        Slot,
    )
    from mosaic.api import Results, run
    from mosaic.core.errors import ConfigError, MosaicError
    from mosaic.environments import EnvironmentAdapter, Outcome, make_environment
    from mosaic.experiment import Experiment, load_experiment
    from mosaic.operators import Operator
    from mosaic.store import Store, open_store

__version__ = "0.1.0"

_HOMES = {
    **dict.fromkeys(("Brain", "BrainContext", "Mode", "Muscle", "MuscleContext", "NoOpBrain",
                     "RandomMuscle", "Slot"), "mosaic.agents"),
    **dict.fromkeys(("ConfigError", "MosaicError"), "mosaic.core.errors"),
    **dict.fromkeys(("EnvironmentAdapter", "Outcome", "make_environment"), "mosaic.environments"),
    **dict.fromkeys(("Experiment", "load_experiment"), "mosaic.experiment"),
    "Operator": "mosaic.operators",
    **dict.fromkeys(("Results", "run"), "mosaic.api"),
    **dict.fromkeys(("Store", "open_store"), "mosaic.store"),
}

__all__ = [
    "Brain",
    "BrainContext",
    "ConfigError",
    "EnvironmentAdapter",
    "Experiment",
    "Mode",
    "MosaicError",
    "Muscle",
    "MuscleContext",
    "NoOpBrain",
    "Operator",
    "Outcome",
    "RandomMuscle",
    "Results",
    "Slot",
    "Store",
    "__version__",
    "load_experiment",
    "make_environment",
    "open_store",
    "run",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
