"""Making an environment from the ``env:`` string of an experiment file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from pettingzoo import AECEnv, ParallelEnv

from mosaic.core.errors import MosaicError
from mosaic.core.imports import ImportPathError, import_module, import_object, resolve_env
from mosaic.environments.adapter import EnvironmentAdapter
from mosaic.environments.gymnasium_adapter import GymnasiumAdapter
from mosaic.environments.pettingzoo_adapter import AECAdapter, ParallelAdapter

#: The params key that picks the PettingZoo API of a ``pettingzoo:`` module offering both.
API_PARAM = "api"
_APIS = ("aec", "parallel")


def make_environment(spec: str, params: Mapping[str, Any]) -> EnvironmentAdapter:
    """Build the environment ``spec`` names, with ``params`` as keyword arguments.

    * ``gymnasium:<id>``: ``gymnasium.make(id, **params)``;
    * ``pettingzoo:<family>.<module>``: ``pettingzoo.<family>.<module>.env(**params)``, or
      ``parallel_env(**params)`` when the module has no ``env`` or when ``params`` holds
      ``api: parallel`` (``api: aec`` asks for ``env`` explicitly; ``api`` is not passed on);
    * ``package.module:Attr``: ``Attr(**params)``, where Attr is a ``gymnasium.Env``,
      ``pettingzoo.AECEnv`` or ``pettingzoo.ParallelEnv`` class, a factory returning one of
      them, or an :class:`EnvironmentAdapter` class.

    Gymnasium environments get a :class:`GymnasiumAdapter`, AEC environments an
    :class:`AECAdapter` and Parallel environments a :class:`ParallelAdapter`.

    Raises :class:`MosaicError` with the reason when the spec cannot be resolved or makes
    something else; errors raised by the environment's own constructor propagate unchanged.
    """
    kind, _, target = spec.partition(":")
    if not target:
        raise MosaicError(f"environment {spec!r}: expected 'gymnasium:<id>', "
                          "'pettingzoo:<family>.<module>' or 'package.module:Attr'")
    if kind == "gymnasium":
        return GymnasiumAdapter(gymnasium.make(target, **dict(params)))
    if kind == "pettingzoo":
        return _adapt(spec, _make_pettingzoo(spec, target, dict(params)))
    try:
        factory = import_object(spec)
    except ImportPathError as error:
        raise MosaicError(f"environment {error}") from error
    return _adapt(spec, factory(**dict(params)))


def _make_pettingzoo(spec: str, target: str, params: dict[str, Any]) -> Any:
    api = params.pop(API_PARAM, None)
    if api is not None and api not in _APIS:
        raise MosaicError(f"environment {spec!r}: params.{API_PARAM} must be 'aec' or "
                          f"'parallel', not {api!r}")
    try:
        resolve_env(spec)  # for its messages: close module names, neither env() nor parallel_env()
        module = import_module(f"pettingzoo.{target}", spec)
    except ImportPathError as error:
        raise MosaicError(f"environment {error}") from error
    constructors = {name: getattr(module, name, None) for name in ("env", "parallel_env")}
    if api is None:
        name = "env" if callable(constructors["env"]) else "parallel_env"
    else:
        name = "env" if api == "aec" else "parallel_env"
    constructor = constructors[name]
    if not callable(constructor):
        offered = [n for n, c in constructors.items() if callable(c)]
        raise MosaicError(f"environment {spec!r}: module 'pettingzoo.{target}' has no {name}() "
                          f"(it offers {', '.join(f'{n}()' for n in offered) or 'neither'}); "
                          + (f"remove params.{API_PARAM} or choose the API it offers"
                             if offered else "name a PettingZoo environment module"))
    return constructor(**params)


def _adapt(spec: str, made: Any) -> EnvironmentAdapter:
    if isinstance(made, EnvironmentAdapter):
        return made
    if isinstance(made, gymnasium.Env):
        return GymnasiumAdapter(made)
    if isinstance(made, AECEnv):
        return AECAdapter(made)
    if isinstance(made, ParallelEnv):
        return ParallelAdapter(made)
    raise MosaicError(f"environment {spec!r} made a {type(made).__name__}, not a gymnasium.Env, "
                      "pettingzoo.AECEnv, pettingzoo.ParallelEnv or EnvironmentAdapter")
