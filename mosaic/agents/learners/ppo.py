"""Proximal policy optimisation (clipped surrogate, GAE) for Box observations and Discrete or
Box actions (CartPole, Acrobot, Pendulum, ...), on the NumPy :class:`~mosaic.agents.learners.MLP`.

The muscle collects a rollout of ``rollout_steps`` env steps with the policy it holds and sends
it to the brain; the brain runs several epochs of minibatch updates on it and answers with the
new policy, which the muscle acts with from its next step (it waits for the answer, so every
rollout is on-policy).

Why one file for both halves: they share the rollout format and the policy head, and change
together (the head and the params live in :mod:`~mosaic.agents.learners.ppo_policy` and
:mod:`~mosaic.agents.learners.ppo_params`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from mosaic.agents.batch import Batch
from mosaic.agents.context import MuscleContext, Slot
from mosaic.agents.learners._common import (
    AgentIds,
    SlotSpaces,
    legal_mask,
    legal_masks,
    load_mlp,
    observation_space,
    rollout_state,
    saved_rollout,
    unwrap,
)
from mosaic.agents.learners.mlp import MLP
from mosaic.agents.learners.ppo_params import PPOParams, check_ppo_params
from mosaic.agents.learners.ppo_policy import PolicyHead
from mosaic.agents.muscle import Muscle
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["PPOMuscle", "PPOSpaces", "ppo_spaces"]


@dataclass(frozen=True)
class PPOSpaces:
    """What PPO needs of the slots' spaces: the network's inputs and the action head's kind."""

    #: The network's inputs: the observation's values, then the agent id's (``id_width``).
    n_inputs: int
    head: PolicyHead
    #: Box actions: the space's bounds (flattened) and its shape and dtype.
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    shape: tuple[int, ...] = ()
    dtype: Any = None
    #: How many of ``n_inputs`` are the agent id's one-hot (0 without ``agent_id``).
    id_width: int = 0

    @property
    def observation_size(self) -> int:
        """The values of one (flattened) observation."""
        return self.n_inputs - self.id_width


def ppo_spaces(slots: Mapping[str, Slot], owner: str, id_width: int = 0) -> PPOSpaces:
    """The spaces shared by all ``slots``, with ``id_width`` agent-id inputs after the
    observation's; :class:`MosaicError` for spaces PPO cannot act in."""
    found = set()
    spaces = None
    for uid, slot in slots.items():
        obs, act = observation_space(slot.observation_space), slot.action_space
        if not isinstance(obs, gymnasium.spaces.Box) or not isinstance(
                act, gymnasium.spaces.Discrete | gymnasium.spaces.Box):
            raise MosaicError(f"{owner} needs a Box observation and a Discrete or Box action "
                              f"space; slot {uid!r} has {obs} and {act}")
        n_inputs = int(np.prod(obs.shape))
        if isinstance(act, gymnasium.spaces.Discrete):
            if int(act.start) != 0:
                raise MosaicError(f"{owner} needs a Discrete action space starting at 0; slot "
                                  f"{uid!r} has {act}")
            spaces = PPOSpaces(n_inputs + id_width, PolicyHead(True, int(act.n)),
                               id_width=id_width)
        else:
            low = np.asarray(act.low, dtype=np.float64).reshape(-1)
            high = np.asarray(act.high, dtype=np.float64).reshape(-1)
            spaces = PPOSpaces(n_inputs + id_width, PolicyHead(False, low.shape[0]), low, high,
                               tuple(act.shape), act.dtype, id_width)
        bounds = (None if spaces.low is None or spaces.high is None
                  else (spaces.low.tobytes(), spaces.high.tobytes()))
        found.add((n_inputs, spaces.head, spaces.shape, bounds))
    if len(found) != 1 or spaces is None:
        raise MosaicError(f"{owner} shares one policy across its slots ({', '.join(slots)}: "
                          f"the env agents policy_mapping maps to this agent), so all need the "
                          f"same observation size and action space")
    return spaces


class _Segment:
    """The steps one slot (or copy) took since its segment began, until it is sent."""

    def __init__(self) -> None:
        self.observations: list[np.ndarray] = []
        self.actions: list[Any] = []
        self.log_probs: list[float] = []
        self.rewards: list[float] = []
        self.masks: list[np.ndarray | None] = []

    def add(self, x: np.ndarray, action: Any, log_prob: float, mask: np.ndarray | None) -> None:
        self.observations.append(x)
        self.actions.append(action)
        self.log_probs.append(log_prob)
        self.rewards.append(0.0)
        self.masks.append(mask)

    def closed(self, last_observation: np.ndarray | None, terminated: bool,
               n_actions: int) -> dict[str, Any]:
        masks = self.masks
        mask_array = None
        if any(m is not None for m in masks):
            mask_array = np.array([np.ones(n_actions, bool) if m is None else m for m in masks])
        return {"observations": np.array(self.observations), "actions": np.array(self.actions),
                "log_probs": np.array(self.log_probs), "rewards": np.array(self.rewards),
                "masks": mask_array, "last_observation": last_observation,
                "terminated": bool(terminated)}


_SEGMENT_FIELDS = ("observations", "actions", "log_probs", "rewards", "masks", "last_observation",
                   "terminated")


class PPOMuscle(SlotSpaces, Muscle):
    """Acts with PPO's policy and sends a rollout to the brain every ``rollout_steps`` steps.

    Spaces: every slot has a ``Box`` observation (flattened to a float vector) and the same
    ``Discrete`` action space starting at 0 (a softmax policy) or ``Box`` action space (a
    diagonal Gaussian whose mean is the network's output and whose log standard deviation is
    learned). Params: :class:`~mosaic.agents.learners.ppo_params.PPOParams`; the muscle uses
    ``rollout_steps``, ``initial_log_std``, ``load_checkpoint`` and ``agent_id``.

    Several slots (parameter sharing: ``policy_mapping`` maps several env agents to the agent)
    act with the one policy, each collecting its own segments, so no trajectory or advantage
    mixes two slots' steps; ``rollout_steps`` counts the steps of all of them. With
    ``agent_id: one_hot`` each observation the network sees ends with the one-hot of its slot
    (:class:`~mosaic.agents.learners._common.AgentIds`), in ``act``, ``act_batch`` and the
    rollout alike.

    Promises: draws come only from ``context.rng`` (one uniform per Discrete action, one
    standard normal per Box action dimension), so the same seed, weights and observations give
    the same actions. Discrete actions honour ``legal_actions`` (or PettingZoo's
    ``{"observation", "action_mask"}``) when sampled, in their log-probability and in test mode,
    where the action is the arg-max legal logit (ties to the lowest). Box actions are clipped to
    the space's bounds when returned (the rollout keeps the sampled value, whose
    log-probability the brain needs); in test mode the action is the clipped mean. In test mode
    nothing is sent.

    Experience: once the steps collected reach ``rollout_steps``, :meth:`feedback` (or
    :meth:`feedback_batch`, for all copies at once) returns ``{"segments": [...], "version"}``.
    Each segment is one slot's or copy's steps in one episode: ``observations`` (T, d), the
    network's inputs (the agent id included),
    ``actions`` (T,) int or (T, size) float, ``log_probs`` (T,), ``rewards`` (T,), ``masks``
    (T, n_actions) bool or ``None``, ``terminated`` and ``last_observation``, the observation
    after the last step to bootstrap from (``None`` when the episode terminated, or ended
    without the slot's observation: a slot that left the game early). A segment ends where its
    episode ends or where the rollout is sent (then it goes on in a new one).
    Updates: the brain's weights (``W0``, ``b0``, ..., ``log_std`` for Box, ``version``).
    Until the first update the policy is the brain's initial one (a zero last layer).
    """

    slots_spaces = staticmethod(ppo_spaces)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.ppo_params.PPOParams`."""
        return PPOParams

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.params = check_ppo_params(context.params, owner)
        self.ids = AgentIds(context.slots, self.params.agent_id, owner)
        self.spaces = ppo_spaces(context.slots, owner, self.ids.width)
        self.head = self.spaces.head
        self.policy: MLP | None = None
        self.log_std = np.full(self.head.size, self.params.initial_log_std)
        if self.params.load_checkpoint:
            if not self.head.discrete:
                raise MosaicError(f"{owner}: load_checkpoint holds an mlp, for Discrete actions")
            self.policy = load_mlp(self.params.load_checkpoint,
                                    (self.spaces.n_inputs, self.head.size), owner)
        self.version = 0
        self.training = context.mode != "test"
        self.rng = context.rng
        # (slot, copy) -> the segment being collected; copy -1 for the single-step methods.
        self._open: dict[tuple[str, int], _Segment] = {}
        self._closed: list[dict[str, Any]] = []
        self._steps = 0

    # -- acting ---------------------------------------------------------------------------
    def _outputs(self, x: np.ndarray) -> np.ndarray:
        if self.policy is None:
            return np.zeros((x.shape[0], self.head.size))
        return self.policy.forward(x)

    def _inputs(self, observations: Any, rows: int, slot: str) -> np.ndarray:
        """The network's inputs (rows, n_inputs): the observations flattened, then ``slot``'s
        agent id."""
        x = np.asarray(observations, dtype=np.float64).reshape(rows, -1)
        if x.shape[1] != self.spaces.observation_size:
            raise MosaicError(f"expected observations of {self.spaces.observation_size} values; "
                              f"got {x.shape[1]}")
        return self.ids.appended(x, slot)

    def _choose(self, x: np.ndarray, masks: np.ndarray | None,
                keys: list[tuple[str, int]]) -> np.ndarray:
        """Actions for the rows of ``x`` (as sent to the environment), recorded under ``keys``."""
        outputs = self._outputs(x)
        if not self.training:
            actions = self.head.greedy(outputs, masks)
        else:
            actions, log_probs = self.head.sample(outputs, self.rng, masks, self.log_std)
            for i, key in enumerate(keys):
                segment = self._open.setdefault(key, _Segment())
                segment.add(x[i], actions[i], float(log_probs[i]),
                            None if masks is None else masks[i])
            self._steps += len(keys)
        if self.head.discrete:
            return actions
        clipped = np.clip(actions, self.spaces.low, self.spaces.high)
        sent: np.ndarray = clipped.reshape(len(keys), *self.spaces.shape).astype(self.spaces.dtype)
        return sent

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        """A sample from the policy (the most likely action in test mode)."""
        observation, legal_actions = unwrap(observation, legal_actions)
        x = self._inputs(observation, 1, slot)
        mask = legal_mask(legal_actions, self.head.size) if self.head.discrete else None
        actions = self._choose(x, None if mask is None else mask[None], [(slot, -1)])
        return int(actions[0]) if self.head.discrete else actions[0]

    def act_batch(self, slot: str, batch: Batch) -> np.ndarray:
        """One action per copy from one forward pass: int64 (copies,) or the Box space's
        dtype (copies, *shape). A copy in ``batch.starts`` drops its unsent unfinished segment."""
        copies = batch.copies
        if copies != self.context.copies:
            raise MosaicError(f"a batch of {copies} copies for a muscle set up for "
                              f"{self.context.copies}")
        observations, legal_actions = unwrap(batch.observations, batch.legal_actions)
        x = self._inputs(observations, copies, slot)
        masks = (legal_masks(legal_actions, self.head.size, copies) if self.head.discrete
                 else None)
        for copy in np.flatnonzero(batch.starts).tolist():
            self._drop((slot, copy))
        actions: np.ndarray = self._choose(x, masks, [(slot, copy) for copy in range(copies)])
        return actions

    def reset(self) -> None:
        """Start an episode: drop the unsent steps of an unfinished previous one."""
        for key in [key for key in self._open if key[1] == -1]:
            self._drop(key)

    def _drop(self, key: tuple[str, int]) -> None:
        segment = self._open.pop(key, None)
        if segment is not None:
            self._steps -= len(segment.actions)

    # -- collecting -----------------------------------------------------------------------
    def _close(self, key: tuple[str, int], observation: Any, terminated: bool) -> None:
        """Close ``key``'s segment, bootstrapping from ``observation`` unless ``terminated``;
        without an observation (a slot that left the game before its episode ended) it ends
        as terminated."""
        segment = self._open.pop(key)
        last = None
        if observation is None:
            terminated = True
        elif not terminated:
            last = self._inputs(unwrap(observation, None)[0], 1, key[0])[0]
        self._closed.append(segment.closed(last, terminated, self.head.size))

    def _cut(self, key: tuple[str, int]) -> None:
        """Close the steps of ``key``'s segment whose outcome is known, bootstrapping from the
        observation of its last step, whose outcome is still to come: that step goes on in a
        new segment."""
        segment = self._open[key]
        if len(segment.actions) < 2:
            return
        rest = _Segment()
        for column in ("observations", "actions", "log_probs", "rewards", "masks"):
            values = getattr(segment, column)
            getattr(rest, column).append(values.pop())
        self._closed.append(segment.closed(rest.observations[0], False, self.head.size))
        self._open[key] = rest

    def _rollout(self) -> dict[str, Any]:
        segments, self._closed = self._closed, []
        self._steps = sum(len(segment.actions) for segment in self._open.values())
        return {"segments": segments, "version": self.version}

    def feedback(
        self,
        slot: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        observation: Any,
    ) -> dict[str, Any] | None:
        """The rollout, once it holds ``rollout_steps`` steps; otherwise ``None``.

        It holds every step whose outcome is known: ``slot``'s, and those of the muscle's other
        slots but their last, whose outcome is still to come (their segments are cut before
        it, bootstrapping from its observation, and it begins their next one). So each rollout
        is learnt from with the policy that collected it, whatever the number of slots.
        """
        key = (slot, -1)
        segment = self._open.get(key)
        if segment is None:
            return None  # test mode, or a reward before this slot's first action
        segment.rewards[-1] += float(reward)
        if terminated or truncated:
            self._close(key, observation, terminated)
        if self._steps < self.params.rollout_steps:
            return None
        if key in self._open:
            self._close(key, observation, False)
        for other in [other for other in self._open if other[1] == -1]:
            self._cut(other)
        return self._rollout()

    def feedback_batch(self, slot: str, batch: Batch) -> list[dict[str, Any]]:
        """The rollout as a one-item list once it holds ``rollout_steps`` steps, each copy's
        segment bootstrapping from the observation that followed its last step; else ``[]``."""
        acted = np.flatnonzero(batch.acted).tolist()
        for copy in acted:
            segment = self._open.get((slot, copy))
            if segment is None:
                continue
            segment.rewards[-1] += float(batch.rewards[copy])
            if batch.terminated[copy] or batch.truncated[copy]:
                self._close((slot, copy), batch.outcome_observation(copy),
                            bool(batch.terminated[copy]))
        if not self.training or self._steps < self.params.rollout_steps:
            return []
        for copy in acted:
            if (slot, copy) in self._open:
                self._close((slot, copy), batch.outcome_observation(copy), False)
        return [self._rollout()]

    def apply_update(self, update: Any) -> None:
        """Act with the weights in ``update`` from now on (``MosaicError`` if they do not fit)."""
        try:
            policy = MLP.from_arrays(update)
            log_std = (self.log_std if self.head.discrete
                       else np.asarray(update["log_std"], dtype=np.float64))
        except (ValueError, TypeError, KeyError) as exc:
            raise MosaicError(f"malformed policy update: {exc}") from exc
        if ((policy.n_inputs, policy.n_outputs) != (self.spaces.n_inputs, self.head.size)
                or log_std.shape != (self.head.size,)):
            raise MosaicError(f"the update maps {policy.n_inputs} inputs to {policy.n_outputs} "
                              f"outputs; this muscle needs {self.spaces.n_inputs} to "
                              f"{self.head.size}"
                              f"{self.ids.mismatch(policy.n_inputs, self.spaces.observation_size)}")
        self.policy, self.log_std = policy, log_std
        self.version = int(update.get("version", self.version))

    # -- state ----------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """The rollout collected so far: its ended segments (``closed.*``) and ``steps``.
        Between episodes no segment of a slot without copies is open; open segments of
        copies are not part of it."""
        return rollout_state(self._closed)

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Go on collecting the rollout in ``state`` (``MosaicError`` if it is malformed)."""
        self._closed, self._steps = saved_rollout(state, _SEGMENT_FIELDS, type(self).__name__)
        self._open.clear()
