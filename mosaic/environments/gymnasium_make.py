"""A Gymnasium environment made from its registered id: the one place mosaic calls
``gymnasium.make`` (an experiment's ``gymnasium:<id>``, its copies and recorded episodes, an
operator worker's own environment, a replayed episode).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from gymnasium.envs.registration import load_env_creator

from mosaic.core.errors import MosaicError

__all__ = ["declared_render_modes", "make_gymnasium"]


def make_gymnasium(env_id: str, params: Mapping[str, Any] | None = None,
                   render_mode: str | None = None) -> gymnasium.Env[Any, Any]:
    """``gymnasium.make(env_id, **params)``, rendering in ``render_mode`` when it is given.

    Raises :class:`~mosaic.core.errors.MosaicError` when ``params`` ask for another render mode
    than ``render_mode``. Gymnasium's own errors for an id it does not know (with its "did you
    mean") and the environment's for keyword arguments it does not take propagate unchanged.
    """
    kwargs = dict(params or {})
    if render_mode is not None:
        asked = kwargs.setdefault("render_mode", render_mode)
        if asked != render_mode:
            raise MosaicError(f"environment {env_id!r} must render in {render_mode!r} here, and "
                              f"its keyword arguments set render_mode={asked!r}")
    return gymnasium.make(env_id, **kwargs)


def declared_render_modes(env_id: str) -> list[str]:
    """The render modes the Gymnasium environment ``env_id`` lists in its metadata.

    Raises what ``gymnasium.spec`` raises for an unknown id, and what importing its entry point
    raises.
    """
    entry = gymnasium.spec(env_id).entry_point
    creator = load_env_creator(entry) if isinstance(entry, str) else entry
    return list(getattr(creator, "metadata", {}).get("render_modes", []))
