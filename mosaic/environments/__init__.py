"""Environments behind one adapter interface: slots with sensors and actuators."""

from mosaic.environments.adapter import EnvironmentAdapter, Outcome
from mosaic.environments.factory import make_environment
from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT, GymnasiumAdapter
from mosaic.environments.pettingzoo_adapter import AECAdapter, ParallelAdapter, action_mask

__all__ = [
    "GYMNASIUM_SLOT",
    "AECAdapter",
    "EnvironmentAdapter",
    "GymnasiumAdapter",
    "Outcome",
    "ParallelAdapter",
    "action_mask",
    "make_environment",
]
