"""Environments behind one adapter interface: slots with sensors and actuators.

The names load on first use: an operator worker makes its Gymnasium environment through
:mod:`mosaic.environments.gymnasium_make` and must not pay for PettingZoo and the vector
environments at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic.core.lazy import lazy_names

if TYPE_CHECKING:
    from mosaic.environments.adapter import EnvironmentAdapter, Outcome
    from mosaic.environments.factory import make_environment
    from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT, GymnasiumAdapter
    from mosaic.environments.gymnasium_make import make_gymnasium
    from mosaic.environments.pettingzoo_adapter import AECAdapter, ParallelAdapter, action_mask

_HOMES = {
    **dict.fromkeys(("EnvironmentAdapter", "Outcome"), "mosaic.environments.adapter"),
    "make_environment": "mosaic.environments.factory",
    **dict.fromkeys(("GYMNASIUM_SLOT", "GymnasiumAdapter"),
                    "mosaic.environments.gymnasium_adapter"),
    "make_gymnasium": "mosaic.environments.gymnasium_make",
    **dict.fromkeys(("AECAdapter", "ParallelAdapter", "action_mask"),
                    "mosaic.environments.pettingzoo_adapter"),
}

__all__ = [
    "GYMNASIUM_SLOT",
    "AECAdapter",
    "EnvironmentAdapter",
    "GymnasiumAdapter",
    "Outcome",
    "ParallelAdapter",
    "action_mask",
    "make_environment",
    "make_gymnasium",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
