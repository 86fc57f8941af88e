"""What the off-policy actor-critic learners (:mod:`.td3`, :mod:`.sac`) share: Box action spaces
scaled to their bounds and the muscle's transition bookkeeping; their brain's replay buffer,
twin critics, Polyak targets, weights, metrics and state are in :mod:`.actor_critic_brain`.

Actions travel between the muscle and the brain in the actor's units, in [-1, 1] per value (the
tanh of the actor's output); only what is sent to the environment is scaled to the space's
bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium
import numpy as np

from mosaic.agents.batch import Batch
from mosaic.agents.context import MuscleContext, Slot
from mosaic.agents.learners._common import (
    AgentIds,
    SlotSpaces,
    mlp_from_update,
    observation_space,
    unwrap,
    update_inputs,
)
from mosaic.agents.learners._params import check_params
from mosaic.agents.learners.mlp import MLP
from mosaic.agents.learners.pending_copies import PendingCopies
from mosaic.agents.muscle import Muscle
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from mosaic.agents.learners.actor_critic_params import ActorCriticParams

__all__ = ["ActorCriticMuscle", "BoxSpaces", "box_spaces", "params_model_of", "space_problem"]


@dataclass(frozen=True)
class BoxSpaces:
    """What an actor-critic learner needs of the slots' spaces."""

    #: The networks' observation inputs: the observation's values, then the agent id's
    #: (``id_width``).
    n_inputs: int
    n_actions: int
    low: np.ndarray
    high: np.ndarray
    shape: tuple[int, ...]
    dtype: Any
    #: How many of ``n_inputs`` are the agent id's one-hot (0 without ``agent_id``).
    id_width: int = 0

    @property
    def observation_size(self) -> int:
        """The values of one (flattened) observation."""
        return self.n_inputs - self.id_width

    def scaled(self, actions: np.ndarray) -> np.ndarray:
        """Actions in [-1, 1] (N, n_actions) as the environment takes them: scaled to the
        bounds, in the space's shape and dtype."""
        values = self.low + (np.clip(actions, -1.0, 1.0) + 1.0) * 0.5 * (self.high - self.low)
        sent: np.ndarray = values.reshape(actions.shape[0], *self.shape).astype(self.dtype)
        return sent


def box_spaces(slots: Mapping[str, Slot], owner: str, id_width: int = 0) -> BoxSpaces:
    """The spaces shared by all ``slots``, with ``id_width`` agent-id inputs after the
    observation's; :class:`MosaicError` naming the slot for anything but a Box observation and
    a bounded Box action space."""
    found = set()
    spaces = None
    for uid, slot in slots.items():
        reason = space_problem(owner, f"slot {uid!r}", slot.observation_space, slot.action_space)
        if reason is not None:
            raise MosaicError(reason)
        obs, act = observation_space(slot.observation_space), slot.action_space
        assert isinstance(obs, gymnasium.spaces.Box) and isinstance(act, gymnasium.spaces.Box)
        low = np.asarray(act.low, dtype=np.float64).reshape(-1)
        high = np.asarray(act.high, dtype=np.float64).reshape(-1)
        spaces = BoxSpaces(int(np.prod(obs.shape)) + id_width, low.shape[0], low, high,
                           tuple(act.shape), act.dtype, id_width)
        found.add((spaces.n_inputs, spaces.shape, low.tobytes(), high.tobytes()))
    if len(found) != 1 or spaces is None:
        raise MosaicError(f"{owner} shares one actor across its slots ({', '.join(slots)}: the "
                          f"env agents policy_mapping maps to this agent), so all need the same "
                          f"observation size and action space")
    return spaces


def space_problem(owner: str, who: str, observation: gymnasium.Space[Any],
                  action: gymnasium.Space[Any]) -> str | None:
    """Why ``owner`` cannot act for ``who`` (``"slot 'agent_0'"``, say) in these spaces, or
    ``None``: anything but a Box observation and a Box action space of finite bounds."""
    observation = observation_space(observation)
    if not isinstance(action, gymnasium.spaces.Box):
        return (f"{owner} needs a Box (continuous) action space; {who} has {action} (use "
                f"DQNBrain or PPOBrain for Discrete actions)")
    if not isinstance(observation, gymnasium.spaces.Box):
        return f"{owner} needs a Box observation space; {who} has {observation}"
    if not (np.isfinite(action.low).all() and np.isfinite(action.high).all()):
        return (f"{owner} scales its actions to the action space's bounds, so they must be "
                f"finite; {who} has {action}")
    return None


def params_model_of(owner: type[Any]) -> type[ActorCriticParams]:
    """The params model that ``owner`` (a TD3 or SAC brain or muscle class) names."""
    from mosaic.agents.learners import actor_critic_params

    model: type[ActorCriticParams] = getattr(actor_critic_params, owner.params_name)
    return model


class ActorCriticMuscle(SlotSpaces, Muscle):
    """Acts with its copy of the actor and sends transitions to the brain; a subclass says how
    the actor's outputs give actions (:meth:`_explore`, :meth:`_greedy`).

    Spaces: :func:`box_spaces`. Its first ``random_steps`` env steps (each copy's step counts)
    act uniformly at random; after them it explores as its learner does. In ``"test"`` mode it
    acts greedily and sends nothing. Every draw comes from ``context.rng``, so the same seed and
    weights give the same actions.

    Experience: one item of columns ``observations``, ``actions`` (in [-1, 1]), ``rewards``,
    ``next_observations``, ``terminated`` and ``truncated``; from :meth:`feedback` one row per
    completed action, from :meth:`feedback_batch` one row per copy that acted. Rewards that
    arrive while a slot's observation is ``None`` add to its pending transition; an episode that
    ends without a final observation does not bootstrap. Updates: the actor (``W0``, ``b0``,
    ...) and ``version``. Several slots (parameter sharing) each keep their own pending
    transition; with ``agent_id: one_hot`` every observation the networks see ends with the
    slot's one-hot (:class:`~mosaic.agents.learners._common.AgentIds`).
    """

    slots_spaces = staticmethod(box_spaces)

    #: The model's name in :mod:`.actor_critic_params`.
    params_name: ClassVar[str]
    #: The actor's outputs per action value.
    outputs_per_action: ClassVar[int] = 1

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """The learner's params model (:mod:`~mosaic.agents.learners.actor_critic_params`)."""
        model: type[BaseModel] = params_model_of(cls)
        return model

    @classmethod
    def space_problem(cls, who: str, observation: gymnasium.Space[Any],
                      action: gymnasium.Space[Any]) -> str | None:
        """Why this muscle cannot act for ``who`` in these spaces (:func:`space_problem`), or
        ``None``; ``mosaic experiment-check`` asks it of every env agent mapped to the agent."""
        return space_problem(cls.__name__, who, observation, action)

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.params = check_params(params_model_of(type(self)), context.params, owner)
        self.ids = AgentIds(context.slots, self.params.agent_id, owner)
        self.spaces = box_spaces(context.slots, owner, self.ids.width)
        self.n_outputs = self.outputs_per_action * self.spaces.n_actions
        self.actor: MLP | None = None
        self.version = 0
        self.training = context.mode != "test"
        self.rng = context.rng
        self.steps = 0
        self._pending: dict[str, list[Any]] = {}  # slot -> [observation, action, reward]
        self._copy_pending = PendingCopies(context.copies)

    def _explore(self, outputs: np.ndarray, slot: str) -> np.ndarray:
        """Exploring actions in [-1, 1] (N, n_actions) for the actor's ``outputs`` for
        ``slot`` (one row per copy with copies, else one)."""
        raise NotImplementedError

    def _copies_begin(self, slot: str, starts: np.ndarray) -> None:
        """The copies of ``slot`` marked in ``starts`` begin an episode (before they act)."""

    def _greedy(self, outputs: np.ndarray) -> np.ndarray:
        """The test-mode actions in [-1, 1] (N, n_actions) for the actor's ``outputs``."""
        raise NotImplementedError

    def _forward(self, x: np.ndarray) -> np.ndarray:
        """What :meth:`_explore` and :meth:`_greedy` are given for the inputs ``x``: the
        actor's outputs (zeros before the brain's first weights)."""
        if self.actor is None:
            return np.zeros((x.shape[0], self.n_outputs))
        return self.actor.forward(x)

    def _actions(self, x: np.ndarray, slot: str) -> np.ndarray:
        outputs = self._forward(x)
        if not self.training:
            return self._greedy(outputs)
        if self.steps < self.params.random_steps:
            actions: np.ndarray = self.rng.uniform(-1.0, 1.0, (x.shape[0], self.spaces.n_actions))
        else:
            actions = self._explore(outputs, slot)
        self.steps += x.shape[0]
        return actions

    def _observations(self, observations: Any, rows: int, slot: str) -> np.ndarray:
        """The networks' observation inputs (rows, n_inputs): the observations, then ``slot``'s
        agent id."""
        x = np.array(observations, dtype=np.float64).reshape(rows, -1)
        if x.shape[1] != self.spaces.observation_size:
            raise MosaicError(f"expected observations of {self.spaces.observation_size} values; "
                              f"got {x.shape[1]}")
        return self.ids.appended(x, slot)

    def reset(self) -> None:
        """Start an episode: forget pending actions."""
        self._pending.clear()

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        """An exploring action (the greedy one in test mode), scaled to the space's bounds."""
        observation, _ = unwrap(observation, legal_actions)
        x = self._observations(observation, 1, slot)
        actions = self._actions(x, slot)
        if self.training:
            self._pending[slot] = [x[0], actions[0], 0.0]
        return self.spaces.scaled(actions)[0]

    def feedback(self, slot: str, reward: float, terminated: bool, truncated: bool,
                 observation: Any) -> dict[str, Any] | None:
        """``slot``'s completed transition as one item; ``None`` in test mode or while its
        observation is ``None``."""
        pending = self._pending.get(slot)
        if pending is None:
            return None
        pending[2] += float(reward)
        if observation is None and not (terminated or truncated):
            return None
        del self._pending[slot]
        x, action, total = pending
        if observation is None:
            next_x, terminated = x, True  # over without a final observation: no bootstrap
        else:
            next_x = self._observations(unwrap(observation, None)[0], 1, slot)[0]
        return {"observations": x[None], "actions": action[None],
                "rewards": np.array([total]), "next_observations": next_x[None],
                "terminated": np.array([bool(terminated)]),
                "truncated": np.array([bool(truncated)])}

    def act_batch(self, slot: str, batch: Batch) -> np.ndarray:
        """One action per copy from one forward pass, in the space's shape and dtype
        (copies, *shape)."""
        copies = self._copy_pending.checked(batch)
        x = self._observations(unwrap(batch.observations, batch.legal_actions)[0], copies, slot)
        self._copy_pending.starts(batch.starts)
        self._copies_begin(slot, batch.starts)
        actions = self._actions(x, slot)
        if self.training:
            self._copy_pending.hold(slot, x, actions)
        return self.spaces.scaled(actions)

    def feedback_batch(self, slot: str, batch: Batch) -> list[dict[str, Any]]:
        """The transitions of the copies in ``batch.acted`` with a pending action, as one item;
        an empty list in test mode or when none completed."""
        copies = self._copy_pending.checked(batch)
        x, actions, rows = self._copy_pending.completed(slot, batch)
        if not rows.shape[0]:
            return []
        next_x = self._observations(unwrap(batch.observations, None)[0], copies, slot)
        for copy, final in batch.final_observations.items():
            if final is not None:
                next_x[copy] = self._observations(unwrap(final, None)[0], 1, slot)[0]
        return [{"observations": x[rows], "actions": actions[rows],
                 "next_observations": next_x[rows], **PendingCopies.outcomes(batch, rows)}]

    def apply_update(self, update: Any) -> None:
        """Act with the actor in ``update`` (``MosaicError`` if it does not fit)."""
        self.actor = mlp_from_update(update, (self.spaces.n_inputs, self.n_outputs), "actor",
                                     self.ids.mismatch(update_inputs(update),
                                                       self.spaces.observation_size))
        self.version = int(update.get("version", self.version))

    def state(self) -> dict[str, np.ndarray]:
        """``steps``: how many of the ``random_steps`` are done."""
        return {"steps": np.array(self.steps, dtype=np.int64)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue from ``state["steps"]`` (``MosaicError`` if missing)."""
        if "steps" not in state:
            raise MosaicError(f"{type(self).__name__} state needs 'steps'; got {sorted(state)}")
        self.steps = int(state["steps"])
