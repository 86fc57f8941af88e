"""Environments behind one adapter interface: slots with sensors and actuators."""

from mosaic.environments.adapter import EnvironmentAdapter, Outcome
from mosaic.environments.factory import make_environment
from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT, GymnasiumAdapter

__all__ = ["GYMNASIUM_SLOT", "EnvironmentAdapter", "GymnasiumAdapter", "Outcome", "make_environment"]
