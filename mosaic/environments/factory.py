"""Making an environment from the ``env:`` string of an experiment file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium

from mosaic.environments.adapter import EnvironmentAdapter
from mosaic.environments.gymnasium_adapter import GymnasiumAdapter
from mosaic.errors import MosaicError


def make_environment(spec: str, params: Mapping[str, Any]) -> EnvironmentAdapter:
    """Build the environment ``spec`` names, with ``params`` as keyword arguments.

    * ``gymnasium:<id>``: ``gymnasium.make(id, **params)``;
    * ``package.module:Attr``: ``Attr(**params)``, where Attr is a ``gymnasium.Env`` class or a
      factory returning an env, or an :class:`EnvironmentAdapter` class.

    Raises :class:`MosaicError` with the reason when the spec cannot be built.
    """
    kind, _, target = spec.partition(":")
    if not target:
        raise MosaicError(f"environment {spec!r}: expected 'gymnasium:<id>' or 'package.module:Class'")
    if kind == "gymnasium":
        return GymnasiumAdapter(gymnasium.make(target, **dict(params)))
    if kind == "pettingzoo":
        raise MosaicError(f"environment {spec!r}: PettingZoo environments are not supported yet")
    from mosaic.experiment.imports import import_object

    factory = import_object(spec)
    made = factory(**dict(params))
    if isinstance(made, EnvironmentAdapter):
        return made
    if isinstance(made, gymnasium.Env):
        return GymnasiumAdapter(made)
    raise MosaicError(
        f"environment {spec!r} made a {type(made).__name__}, not a gymnasium.Env or EnvironmentAdapter"
    )
