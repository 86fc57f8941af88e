"""PettingZoo environments: one slot per PettingZoo agent, taking turns (AEC) or acting together.

Both adapters keep observations exactly as the environment gives them and read action masks the
way PettingZoo's own tools do: from ``observation["action_mask"]`` when the observation is a dict
holding one (the classic games), otherwise from ``info["action_mask"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import AECEnv, ParallelEnv

from mosaic.core.errors import MosaicError
from mosaic.environments.adapter import EnvironmentAdapter, Outcome
from mosaic.environments.global_state import GLOBAL_STATE, GlobalState

__all__ = ["AECAdapter", "ParallelAdapter", "action_mask"]

_NO_REWARDS: dict[str, float] = {}
_NO_MASKS: dict[str, Any] = {}


def action_mask(observation: Any, info: Any) -> Any | None:
    """The action mask of one agent, or ``None`` when the environment gives none.

    ``observation["action_mask"]`` when the observation is a mapping with that key, else
    ``info["action_mask"]`` when ``info`` is a mapping with that key. The mask is returned as
    the environment made it (not copied or converted).
    """
    if isinstance(observation, Mapping):
        mask = observation.get("action_mask")
        if mask is not None:
            return mask
    if isinstance(info, Mapping):
        return info.get("action_mask")
    return None


def _slots(env: AECEnv[Any, Any, Any] | ParallelEnv[Any, Any, Any]
           ) -> dict[str, tuple[gymnasium.Space[Any], gymnasium.Space[Any]]]:
    """slot -> (observation space, action space) for every possible agent, read once."""
    agents = getattr(env, "possible_agents", None)
    if not agents:
        raise MosaicError(f"{type(env).__name__} lists no possible_agents; a PettingZoo "
                          "environment must name its agents in possible_agents when it is made")
    odd = [agent for agent in agents if not isinstance(agent, str)]
    if odd:
        raise MosaicError(f"{type(env).__name__} has agent ids that are not strings: {odd!r}; "
                          "mosaic names slots by str agent ids")
    # Read each space once: the slots must hand out the same space objects on every call.
    return {agent: (env.observation_space(agent), env.action_space(agent)) for agent in agents}


def _masks(observations: Mapping[str, Any], infos: Mapping[str, Any],
           agents: Iterable[str]) -> dict[str, Any]:
    masks = {}
    for agent in agents:
        observation, info = observations.get(agent), infos.get(agent)
        if type(observation) is np.ndarray and (info is None or (type(info) is dict and not info)):
            continue  # nowhere to hold a mask (the common case, told cheaply)
        mask = action_mask(observation, info)
        if mask is not None:
            masks[agent] = mask
    return masks


def _infos(infos: Mapping[str, Any], agents: Iterable[str]) -> dict[str, Any]:
    """The non-empty infos of ``agents``."""
    return {agent: info for agent in agents if (info := infos.get(agent))}


def _episode_end(ended: Iterable[tuple[bool, bool]]) -> tuple[bool, bool]:
    """(terminated, truncated) of an episode whose last agents ended with these flags."""
    terminated = any(flags[0] for flags in ended)
    return terminated, not terminated


class AECAdapter(EnvironmentAdapter):
    """Wraps a ``pettingzoo.AECEnv``: one agent acts per step, the one the environment selects.

    Slots are the environment's ``possible_agents``. Every outcome has at most one acting slot,
    with its observation and, when the environment gives one, its action mask.

    Agents that are terminated or truncated are stepped with ``None`` by the adapter itself
    (PettingZoo's dead-agent rule), so ``acting`` never names one. ``rewards`` holds the rewards
    of the step that was taken, for every agent the environment reports (``env.rewards``),
    read before any dead agent is stepped. The episode ends when no agents remain: then
    ``acting`` is empty, ``observations`` holds the final observation of every agent that left
    in that step, and the episode counts as terminated if one of them terminated, else as
    truncated. An agent that leaves earlier contributes its final observation and rewards to
    the step it left in, while the episode goes on. ``infos`` holds ``env.infos`` of the
    agents in ``observations`` (of one that left, as it was before it was stepped out).

    Raises :class:`MosaicError` when stepped without an action for the selected agent, or after
    the episode ended and before the next reset.
    """

    def __init__(self, env: AECEnv[str, Any, Any]) -> None:
        if not isinstance(env, AECEnv):
            raise MosaicError(f"AECAdapter needs a pettingzoo.AECEnv, got {type(env).__name__}")
        self.env = env
        self.slots = _slots(env)
        self._closed = False

    def reset(self, seed: int | None) -> Outcome:
        """Reset the environment with ``seed``; the outcome names the first agent to act."""
        self.env.reset(seed=seed)
        if not self.env.agents:
            raise MosaicError(f"{self.env} has no agents after reset")
        final, infos = self._remove_dead()
        if not self.env.agents:
            raise MosaicError(f"{self.env} ended its episode during reset")
        return self._outcome(final, _NO_REWARDS, infos)

    def step(self, actions: Mapping[str, Any]) -> Outcome:
        """Step the selected agent's action from ``actions``; other entries are ignored."""
        env = self.env
        if not env.agents:
            raise MosaicError(f"the episode of {env} is over: reset it before stepping")
        agent = env.agent_selection
        if agent not in actions:
            raise MosaicError(f"{env}: no action for {agent!r}, the agent whose turn it is "
                              f"(actions were given for {sorted(actions)})")
        env.step(actions[agent])
        # Dead steps clear env.rewards, so read the rewards of this step first.
        rewards = {name: float(reward) for name, reward in env.rewards.items()}
        flags = [(bool(env.terminations.get(name)), bool(env.truncations.get(name)))
                 for name in env.agents]
        ended = [flag for flag in flags if any(flag)]
        final, infos = self._remove_dead()
        if env.agents:
            return self._outcome(final, rewards, infos)
        terminated, truncated = _episode_end(ended)
        return Outcome(final, rewards, terminated, truncated, (), _NO_MASKS, infos)

    def _remove_dead(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Step ``None`` for each selected dead agent; return their final observations and
        their (non-empty) infos."""
        env = self.env
        final: dict[str, Any] = {}
        infos: dict[str, Any] = {}
        # Each dead step removes one agent, so a conforming environment needs at most this many.
        for _ in range(len(env.agents) + 1):
            if not env.agents:
                return final, infos
            agent = env.agent_selection
            if not (env.terminations[agent] or env.truncations[agent]):
                return final, infos
            final[agent] = env.observe(agent)
            info = env.infos.get(agent)
            if info:
                infos[agent] = info
            env.step(None)
        raise MosaicError(f"{env} keeps selecting agents that are done after stepping None for "
                          "them; it does not follow PettingZoo's dead-agent rule")

    def _outcome(self, observations: dict[str, Any], rewards: dict[str, float],
                 infos: dict[str, Any]) -> Outcome:
        env = self.env
        agent = env.agent_selection
        observation = env.observe(agent)
        observations[agent] = observation
        info = env.infos.get(agent)
        if info:
            infos[agent] = info
        mask = action_mask(observation, info)
        legal = _NO_MASKS if mask is None else {agent: mask}
        return Outcome(observations, rewards, False, False, (agent,), legal, infos)

    def close(self) -> None:
        """Close the environment once; later calls do nothing."""
        if not self._closed:
            self._closed = True
            self.env.close()


class ParallelAdapter(EnvironmentAdapter):
    """Wraps a ``pettingzoo.ParallelEnv``: every live agent acts in every step.

    Slots are the environment's ``possible_agents``. ``acting`` names the agents in
    ``env.agents`` that are neither terminated nor truncated; ``observations`` and ``rewards``
    are what the environment returned for its agents (those that just left included), and
    ``legal_actions`` holds the masks of the acting agents. The episode ends when no agent is
    left to act: it counts as terminated if an agent that left in the last step terminated,
    else as truncated. ``infos`` holds the infos the environment returned for them.

    With ``global_state`` the info of every slot in ``observations`` also holds the global
    state under ``"global_state"`` (:mod:`mosaic.environments.global_state`); without it
    nothing is computed.

    Raises :class:`MosaicError` when an acting agent has no action in ``actions``, or when
    stepped after the episode ended and before the next reset.
    """

    def __init__(self, env: ParallelEnv[str, Any, Any], global_state: bool = False) -> None:
        if not isinstance(env, ParallelEnv):
            raise MosaicError(f"ParallelAdapter needs a pettingzoo.ParallelEnv, got "
                              f"{type(env).__name__}")
        self.env = env
        self.slots = _slots(env)
        self._acting: tuple[str, ...] = ()
        self._closed = False
        self._global_state = GlobalState(env, self.slots) if global_state else None

    def reset(self, seed: int | None) -> Outcome:
        """Reset the environment with ``seed``; every agent it starts with acts first."""
        observations, infos = self.env.reset(seed=seed)
        acting = tuple(self.env.agents)
        if not acting:
            raise MosaicError(f"{self.env} has no agents after reset")
        self._acting = acting
        return Outcome(dict(observations), _NO_REWARDS, False, False, acting,
                       _masks(observations, infos, acting), self._infos(infos, observations))

    def step(self, actions: Mapping[str, Any]) -> Outcome:
        """Step one action per acting agent, taken from ``actions``; other entries are ignored."""
        before = self._acting
        if not before:
            raise MosaicError(f"the episode of {self.env} is over: reset it before stepping")
        missing = [agent for agent in before if agent not in actions]
        if missing:
            raise MosaicError(f"{self.env}: no action for {missing} (actions were given for "
                              f"{sorted(actions)})")
        observations, rewards, terminations, truncations, infos = self.env.step(
            {agent: actions[agent] for agent in before})
        acting = tuple(agent for agent in self.env.agents
                       if not (terminations.get(agent) or truncations.get(agent)))
        self._acting = acting
        step_rewards = {agent: float(reward) for agent, reward in rewards.items()}
        if acting:
            return Outcome(dict(observations), step_rewards, False, False, acting,
                           _masks(observations, infos, acting), self._infos(infos, observations))
        ended = [(bool(terminations.get(agent)), bool(truncations.get(agent))) for agent in before]
        terminated, truncated = _episode_end(ended)
        return Outcome(dict(observations), step_rewards, terminated, truncated, (), _NO_MASKS,
                       self._infos(infos, observations))

    def _infos(self, infos: Mapping[str, Any], observations: Mapping[str, Any]
               ) -> dict[str, Any]:
        """The non-empty infos of the agents in ``observations``, each with the global state
        when it was asked for."""
        if self._global_state is None:
            return _infos(infos, observations)
        state = self._global_state(observations)
        return {agent: {**(infos.get(agent) or {}), GLOBAL_STATE: state}
                for agent in observations}

    def close(self) -> None:
        """Close the environment once; later calls do nothing."""
        if not self._closed:
            self._closed = True
            self.env.close()
