"""MAPPO's muscle: decentralised actors for PettingZoo parallel environments, whose rollouts
carry what a centralised critic sees.

MAPPO (Yu et al., 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
Games") is PPO whose value network sees the environment's global state while each slot's
policy sees its own observation only. The slots of one mosaic agent share the policy
(parameter sharing; ``agent_id: one_hot`` tells them apart), each slot's steps make its own
segments, so GAE runs per slot. ``critic: local`` gives independent PPO (IPPO) with the same
code, the baseline MAPPO is measured against. The brain is
:class:`~mosaic.agents.learners.mappo_brain.MAPPOBrain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.context import MuscleContext
from mosaic.agents.learners._common import (
    AgentIds,
    SlotSpaces,
    legal_mask,
    rollout_state,
    saved_rollout,
    unwrap,
)
from mosaic.agents.learners.mappo_params import MAPPOParams, check_mappo_params
from mosaic.agents.learners.mlp import MLP
from mosaic.agents.learners.ppo import ppo_spaces
from mosaic.agents.muscle import Muscle
from mosaic.core.errors import MosaicError
from mosaic.environments.global_state import GLOBAL_STATE, GLOBAL_STATE_PARAM

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

__all__ = ["MAPPOMuscle"]

_SEGMENT_FIELDS = ("observations", "critic_inputs", "actions", "log_probs", "rewards", "masks",
                   "last_critic_input", "terminated")


class _Segment:
    """One slot's steps since its segment began, until it is sent."""

    def __init__(self) -> None:
        self.observations: list[np.ndarray] = []
        self.critic_inputs: list[np.ndarray] = []
        self.actions: list[Any] = []
        self.log_probs: list[float] = []
        self.rewards: list[float] = []
        self.masks: list[np.ndarray | None] = []

    def closed(self, last_critic_input: np.ndarray | None, terminated: bool,
               n_actions: int) -> dict[str, Any]:
        masks = None
        if any(m is not None for m in self.masks):
            masks = np.array([np.ones(n_actions, bool) if m is None else m for m in self.masks])
        return {"observations": np.array(self.observations),
                "critic_inputs": np.array(self.critic_inputs),
                "actions": np.array(self.actions), "log_probs": np.array(self.log_probs),
                "rewards": np.array(self.rewards), "masks": masks,
                "last_critic_input": last_critic_input, "terminated": bool(terminated)}


class MAPPOMuscle(SlotSpaces, Muscle):
    """Acts with the shared policy for each of its slots; sends a rollout every
    ``rollout_steps`` slot steps.

    Spaces: as :class:`~mosaic.agents.learners.PPOMuscle` (a ``Box`` observation, the same
    ``Discrete`` or ``Box`` action space for every slot). Params:
    :class:`~mosaic.agents.learners.mappo_params.MAPPOParams`; the muscle uses
    ``rollout_steps``, ``initial_log_std``, ``agent_id`` and ``critic``.

    The critic's input of a step is, with ``critic: centralised``, the environment's global
    state as the slot's info gave it with the observation acted on (``info["global_state"]``,
    which a PettingZoo parallel environment gives with ``params: {global_state: true}``; see
    :mod:`mosaic.environments.global_state`) followed by the policy's input (MAPPO's
    agent-specific global state); with ``critic: state`` that global state followed by the
    slot's one-hot alone (with ``agent_id: one_hot``; MAPPO's environment-provided state, for
    a team whose reward is shared, where the slot's own view adds inputs and nothing the
    team's value depends on); and with ``critic: local`` the policy's input alone: the slot's
    observation, and its one-hot with ``agent_id: one_hot``.

    Promises: draws come only from ``context.rng`` (one uniform per Discrete action, one
    standard normal per Box action dimension), as PPO's; in test mode the action is the most
    likely one (the clipped mean for Box actions), nothing is sent and no global state is
    needed. Raises :class:`MosaicError`, naming the environment and the key to set, when a
    centralised critic gets a slot's info without a global state.

    Experience: ``{"segments": [...], "version"}``; a segment is one slot's steps in one episode
    (or until the rollout is sent): ``observations`` (T, policy inputs), ``critic_inputs``
    (T, critic inputs), ``actions``, ``log_probs``, ``rewards``, ``masks`` (or ``None``),
    ``terminated`` and ``last_critic_input`` (the critic's input after the last step, to
    bootstrap from; ``None`` when the episode terminated). Updates: the policy's weights
    (``W0``, ``b0``, ..., ``log_std`` for Box actions, ``version``).
    """

    slots_spaces = staticmethod(ppo_spaces)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.mappo_params.MAPPOParams`."""
        return MAPPOParams

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.params = params = check_mappo_params(context.params, owner)
        self.spaces = ppo_spaces(context.slots, owner)
        self.head = self.spaces.head
        self.ids = AgentIds(context.slots, params.agent_id, owner)
        self.n_inputs = self.spaces.n_inputs + self.ids.width
        self.centralised = params.critic != "local"
        self.state_only = params.critic == "state"
        self.policy: MLP | None = None
        self.log_std = np.full(self.head.size, params.initial_log_std)
        self.version = 0
        self.training = context.mode != "test"
        self.rng = context.rng
        self._open: dict[str, _Segment] = {}
        self._closed: list[dict[str, Any]] = []
        self._steps = 0
        #: slot -> the global state its last info gave (centralised critic, training only).
        self._states: dict[str, np.ndarray] = {}

    # -- what the networks see ----------------------------------------------------------------
    def receive_info(self, slot: str, info: Mapping[str, Any]) -> None:
        """Keep the slot's global state for the critic (centralised critic, training only)."""
        if not (self.centralised and self.training):
            return
        state = info.get(GLOBAL_STATE)
        if state is None:
            raise MosaicError(
                f"{type(self).__name__}: its centralised critic needs the global state, and "
                f"environment {self.context.environment!r} gives none in the info of slot "
                f"{slot!r}: give that environment params: {{{GLOBAL_STATE_PARAM}: true}} (a "
                "PettingZoo parallel environment), or the agent params: {critic: local}")
        self._states[slot] = np.asarray(state, dtype=np.float64).reshape(-1)

    def _policy_input(self, slot: str, observation: Any) -> np.ndarray:
        x = np.asarray(observation, dtype=np.float64).reshape(1, -1)
        if x.shape[1] != self.spaces.n_inputs:
            raise MosaicError(f"expected observations of {self.spaces.n_inputs} values; got "
                              f"{x.shape[1]}")
        inputs: np.ndarray = self.ids.appended(x, slot)
        return inputs

    def _critic_input(self, slot: str, x: np.ndarray) -> np.ndarray:
        """The critic's input for ``slot`` now; ``x`` is the policy's (1, n) input."""
        if not self.centralised:
            own: np.ndarray = x[0]
            return own
        state = self._states.get(slot)
        if state is None:
            raise MosaicError(f"{type(self).__name__}: no global state for slot {slot!r} yet")
        if self.state_only:  # the state and the slot's one-hot (the last ids.width inputs)
            return np.concatenate([state, x[0, x.shape[1] - self.ids.width:]])
        # MAPPO's agent-specific global state: the same state for every slot, made the slot's
        # own by its observation (and id), which the value of its rewards depends on.
        return np.concatenate([state, x[0]])

    # -- acting ---------------------------------------------------------------------------
    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        """A sample from the shared policy (the most likely action in test mode)."""
        observation, legal_actions = unwrap(observation, legal_actions)
        x = self._policy_input(slot, observation)
        mask = legal_mask(legal_actions, self.head.size) if self.head.discrete else None
        masks = None if mask is None else mask[None]
        outputs = (np.zeros((1, self.head.size)) if self.policy is None
                   else self.policy.forward(x))
        if not self.training:
            actions = self.head.greedy(outputs, masks)
        else:
            actions, log_probs = self.head.sample(outputs, self.rng, masks, self.log_std)
            segment = self._open.setdefault(slot, _Segment())
            segment.observations.append(x[0])
            segment.critic_inputs.append(self._critic_input(slot, x))
            segment.actions.append(actions[0])
            segment.log_probs.append(float(log_probs[0]))
            segment.rewards.append(0.0)
            segment.masks.append(mask)
            self._steps += 1
        if self.head.discrete:
            return int(actions[0])
        clipped = np.clip(actions[0], self.spaces.low, self.spaces.high)
        return clipped.reshape(self.spaces.shape).astype(self.spaces.dtype)

    def reset(self) -> None:
        """Start an episode: drop the unsent steps of an unfinished previous one."""
        for segment in self._open.values():
            self._steps -= len(segment.actions)
        self._open.clear()
        self._states.clear()

    # -- collecting -----------------------------------------------------------------------
    def _close(self, slot: str, observation: Any, terminated: bool) -> None:
        segment = self._open.pop(slot)
        last = None
        if not terminated:
            if observation is None:
                raise MosaicError(f"{type(self).__name__}: slot {slot!r} ended its segment "
                                  "without an observation to bootstrap from")
            x = self._policy_input(slot, unwrap(observation, None)[0])
            last = self._critic_input(slot, x)
        self._closed.append(segment.closed(last, terminated, self.head.size))

    def _cut(self, slot: str) -> None:
        """Close the steps of ``slot``'s segment whose outcome is known, bootstrapping from the
        critic's input at its last step, whose outcome is still to come: that step goes on in
        a new segment."""
        segment = self._open[slot]
        if len(segment.actions) < 2:
            return
        rest = _Segment()
        for column in ("observations", "critic_inputs", "actions", "log_probs", "rewards",
                       "masks"):
            getattr(rest, column).append(getattr(segment, column).pop())
        self._closed.append(segment.closed(rest.critic_inputs[0], False, self.head.size))
        self._open[slot] = rest

    def feedback(self, slot: str, reward: float, terminated: bool, truncated: bool,
                 observation: Any) -> dict[str, Any] | None:
        """The rollout, once it holds ``rollout_steps`` slot steps; otherwise ``None``.

        It holds every step whose outcome is known: ``slot``'s, and those of the other slots
        but their last, whose outcome is still to come (their segments are cut before it,
        bootstrapping from the critic's input there, and it begins their next one), as
        :class:`~mosaic.agents.learners.PPOMuscle` does. So each rollout is learnt from with
        the policy that collected it.
        """
        segment = self._open.get(slot)
        if segment is None:
            return None  # test mode, or a reward before this slot's first action
        segment.rewards[-1] += float(reward)
        if terminated or truncated:
            self._close(slot, observation, terminated)
        if self._steps < self.params.rollout_steps:
            return None
        if slot in self._open:
            self._close(slot, observation, False)
        for other in list(self._open):
            self._cut(other)
        segments, self._closed = self._closed, []
        self._steps = sum(len(open_segment.actions) for open_segment in self._open.values())
        return {"segments": segments, "version": self.version}

    def apply_update(self, update: Any) -> None:
        """Act with the weights in ``update`` from now on (``MosaicError`` if they do not fit)."""
        try:
            policy = MLP.from_arrays(update)
            log_std = (self.log_std if self.head.discrete
                       else np.asarray(update["log_std"], dtype=np.float64))
        except (ValueError, TypeError, KeyError) as exc:
            raise MosaicError(f"malformed policy update: {exc}") from exc
        if ((policy.n_inputs, policy.n_outputs) != (self.n_inputs, self.head.size)
                or log_std.shape != (self.head.size,)):
            raise MosaicError(f"the update maps {policy.n_inputs} inputs to {policy.n_outputs} "
                              f"outputs; this muscle needs {self.n_inputs} to {self.head.size}"
                              + self.ids.mismatch(policy.n_inputs, self.spaces.n_inputs))
        self.policy, self.log_std = policy, log_std
        self.version = int(update.get("version", self.version))

    # -- state ----------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """The rollout collected so far: its ended segments (``closed.*``) and ``steps``
        (between episodes no segment is open)."""
        return rollout_state(self._closed)

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Go on collecting the rollout in ``state`` (``MosaicError`` if it is malformed)."""
        self._closed, self._steps = saved_rollout(state, _SEGMENT_FIELDS, type(self).__name__)
        self._open.clear()
