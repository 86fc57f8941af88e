"""The global state of a PettingZoo parallel environment, for centralised critics.

A learner whose critic sees the whole environment (MAPPO's) asks for it with
``params: {global_state: true}`` on the environment's entry. The parallel adapter then puts it
under the info key :data:`GLOBAL_STATE` of every slot in each reset and step, as a flat float64
array: ``env.state()`` where the environment has one, otherwise the joint observation (every
possible agent's observation, flattened, in ``possible_agents`` order, zeros for an agent that
has none in that step). Nothing is computed for an environment that was not asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from mosaic.core.errors import MosaicError
from mosaic.environments.info import MAX_ELEMENTS

__all__ = ["GLOBAL_STATE", "GLOBAL_STATE_PARAM", "GlobalState"]

#: The info key that carries the global state to the muscles.
GLOBAL_STATE = "global_state"
#: The environment ``params`` key that asks for it (mosaic's, not passed to the environment).
GLOBAL_STATE_PARAM = "global_state"


class GlobalState:
    """Reads the global state of one parallel environment (see the module).

    Which source it reads (``env.state()`` or the joint observation) is settled at the first
    call: an environment whose ``state()`` raises ``NotImplementedError`` (PettingZoo's default),
    fails otherwise (rps_v2 keeps a dict named ``state``, which its wrappers then call) or gives
    no numeric array gives its joint observation from then on. Raises :class:`MosaicError` when
    the state has more values than an info carries (:data:`MAX_ELEMENTS`), or becomes
    non-numeric later.
    """

    def __init__(self, env: Any, slots: Mapping[str, tuple[gymnasium.Space[Any], Any]]) -> None:
        self._env = env
        self._spaces = {agent: spaces[0] for agent, spaces in slots.items()}
        self._sizes = {agent: gymnasium.spaces.flatdim(space)
                       for agent, space in self._spaces.items()}
        #: "state" or "joint", once known.
        self.source: str | None = None

    def __call__(self, observations: Mapping[str, Any]) -> np.ndarray:
        """The global state after the reset or step that gave ``observations``."""
        if self.source is None:
            self.source = "state" if self._has_state() else "joint"
        state = self._state() if self.source == "state" else self._joint(observations)
        if state.shape[0] > MAX_ELEMENTS:
            raise MosaicError(f"{self._env}: its global state ({self.source}) has "
                              f"{state.shape[0]} values, more than the {MAX_ELEMENTS} an info "
                              "carries; a centralised critic cannot take it (leave out "
                              f"params.{GLOBAL_STATE_PARAM} and give the agent critic: local)")
        return state

    def _has_state(self) -> bool:
        state = getattr(self._env, "state", None)
        if not callable(state):
            return False
        try:
            probe = np.asarray(state())
        except (NotImplementedError, TypeError, AttributeError, ValueError):
            return False
        return probe.dtype.kind in "biuf" and probe.size > 0

    def _state(self) -> np.ndarray:
        raw = np.asarray(self._env.state())
        if raw.dtype.kind not in "biuf":
            raise MosaicError(f"{self._env}: state() gives a {raw.dtype} array; a centralised "
                              "critic needs numbers")
        return raw.astype(np.float64).reshape(-1)

    def _joint(self, observations: Mapping[str, Any]) -> np.ndarray:
        parts = []
        for agent, space in self._spaces.items():
            observation = observations.get(agent)
            if observation is None:
                parts.append(np.zeros(self._sizes[agent]))
            else:
                parts.append(np.asarray(gymnasium.spaces.flatten(space, observation),
                                        dtype=np.float64).reshape(-1))
        return np.concatenate(parts)
