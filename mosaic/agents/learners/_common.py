"""What mosaic's built-in learners share: action masks, PettingZoo observations, and the spaces
of a network learner."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np

from mosaic.agents.context import Slot
from mosaic.agents.learners.mlp import MLP
from mosaic.agents.policies import MLPPolicy, load_policy
from mosaic.core.errors import MosaicError

__all__ = ["AGENT_ID_KINDS", "AgentIds", "SlotSpaces", "legal_mask", "legal_masks", "load_mlp",
           "observation_space", "pack_records", "policy_shape", "rollout_state", "saved_rollout",
           "shared_shape", "unpack_records", "unwrap"]

#: The values of a network learner's ``agent_id`` param.
AGENT_ID_KINDS = ("none", "one_hot")

#: (slot uid, observation space, action space) -> the (inputs, actions) sizes a learner takes.
Sizes = Callable[[str, gymnasium.Space[Any], gymnasium.Space[Any]], tuple[int, int]]


def unwrap(observation: Any, legal_actions: Any) -> tuple[Any, Any]:
    """Accept PettingZoo's ``{"observation", "action_mask"}`` observations as well."""
    if isinstance(observation, dict) and "observation" in observation:
        if legal_actions is None:
            legal_actions = observation.get("action_mask")
        observation = observation["observation"]
    return observation, legal_actions


def observation_space(space: gymnasium.Space[Any]) -> gymnasium.Space[Any]:
    """What a learner sees of ``space``: the ``"observation"`` entry of PettingZoo's
    ``Dict({"observation", "action_mask"})`` (the mask is not an input, it restricts the
    actions), else ``space`` itself."""
    if (isinstance(space, gymnasium.spaces.Dict) and "observation" in space.spaces
            and set(space.spaces) <= {"observation", "action_mask"}):
        return space.spaces["observation"]
    return space


def legal_mask(legal_actions: Any, n_actions: int) -> np.ndarray | None:
    """The action mask as a bool array of length ``n_actions`` (``None``: all legal)."""
    if legal_actions is None:
        return None
    mask = np.asarray(legal_actions).reshape(-1).astype(bool)
    if mask.shape[0] != n_actions:
        raise MosaicError(f"the action mask has {mask.shape[0]} entries for {n_actions} actions")
    if not mask.any():
        raise MosaicError("the action mask allows no action")
    return mask


def legal_masks(legal_actions: Any, n_actions: int, copies: int) -> np.ndarray | None:
    """The action masks of ``copies`` copies as a bool (copies, n_actions) array (``None``: all
    legal)."""
    if legal_actions is None:
        return None
    masks = np.asarray(legal_actions).astype(bool)
    if masks.shape[0] != copies:
        raise MosaicError(f"{masks.shape[0]} action masks for {copies} copies")
    masks = masks.reshape(copies, -1)
    if masks.shape[1] != n_actions:
        raise MosaicError(f"the action masks have {masks.shape[1]} entries for {n_actions} "
                          f"actions")
    empty = np.flatnonzero(~masks.any(axis=1))
    if empty.shape[0]:
        raise MosaicError(f"the action mask of copy {int(empty[0])} allows no action")
    return masks


class SlotSpaces:
    """A learner that acts in all its slots with one network (or table), whose spaces it reads
    with ``slots_spaces(slots, owner)``: that raises MosaicError for spaces it cannot take and
    for slots that disagree. :meth:`slots_problem` asks it before a run (experiment-check)."""

    slots_spaces: Callable[[Mapping[str, Slot], str], object]

    @classmethod
    def slots_problem(cls, slots: Mapping[str, Slot]) -> str | None:
        """Why this learner cannot act in all of ``slots`` at once, or ``None``."""
        try:
            cls.slots_spaces(slots, cls.__name__)
        except MosaicError as error:
            return str(error)
        return None


def shared_shape(slots: Mapping[str, Slot], owner: str,
                 sizes: Sizes, shared: str, same: str) -> tuple[int, int]:
    """The (inputs, actions) sizes that ``sizes(uid, observation space, action space)`` gives
    every one of ``slots``, when they all agree.

    ``sizes`` raises MosaicError for spaces the learner cannot take; slots that disagree raise
    MosaicError too, since the learner keeps one ``shared`` (e.g. "policy") for all of them, so
    they need the ``same`` sizes (named for the error).
    """
    shapes = {sizes(uid, observation_space(slot.observation_space), slot.action_space)
              for uid, slot in slots.items()}
    if len(shapes) != 1:
        raise MosaicError(f"{owner} shares one {shared} across its slots, so all need the same "
                          f"{same}; got {sorted(shapes)}")
    return shapes.pop()


def policy_shape(slots: Mapping[str, Slot], owner: str) -> tuple[int, int]:
    """(observation size, n_actions) shared by all ``slots``; MosaicError for other spaces."""
    def sizes(uid: str, obs: gymnasium.Space[Any],
              act: gymnasium.Space[Any]) -> tuple[int, int]:
        if not (isinstance(obs, gymnasium.spaces.Box)
                and isinstance(act, gymnasium.spaces.Discrete)):
            raise MosaicError(
                f"{owner} needs a Box observation and a Discrete action space; slot {uid!r} has "
                f"{obs} and {act} (use TabularQBrain for Discrete observations)")
        if int(act.start) != 0:
            raise MosaicError(f"{owner} needs a Discrete action space starting at 0; slot "
                              f"{uid!r} has {act}")
        return int(np.prod(obs.shape)), int(act.n)

    return shared_shape(slots, owner, sizes, "policy",
                        "observation size and number of actions")


class AgentIds:
    """The agent-id feature of a network learner (``agent_id: one_hot``): the one-hot of a slot's
    index among ``slots`` appended to each observation the network sees, so that slots sharing
    one network can still act apart.

    The index is the slot's position among the sorted ids of ``slots`` (Python's string order:
    ``agent_0``, ``agent_1``, ..., ``agent_10`` before ``agent_2``), the same in every process
    and placement. A muscle takes its own slots, a brain the slots of all its muscles, so an
    agent that acts in several environments needs the same slot ids in each. With ``kind``
    ``"none"`` nothing is appended (``width`` 0).
    """

    def __init__(self, slots: Iterable[str], kind: str, owner: str) -> None:
        if kind not in AGENT_ID_KINDS:
            raise MosaicError(f"{owner}: params.agent_id must be one of {AGENT_ID_KINDS}; "
                              f"got {kind!r}")
        self.slots: tuple[str, ...] = tuple(sorted(slots)) if kind == "one_hot" else ()
        self.width = len(self.slots)
        self._rows = {slot: np.eye(self.width)[index] for index, slot in enumerate(self.slots)}

    def appended(self, x: np.ndarray, slot: str) -> np.ndarray:
        """``x`` (rows, d) with ``slot``'s one-hot appended to every row (``x`` itself when
        the feature is off); ``MosaicError`` for a slot the learner was not set up with."""
        if not self.width:
            return x
        row = self._rows.get(slot)
        if row is None:
            raise MosaicError(f"agent_id: slot {slot!r} is not one of {list(self.slots)}")
        return np.concatenate([x, np.broadcast_to(row, (x.shape[0], self.width))], axis=1)

    def mismatch(self, n_inputs: int, observation_size: int) -> str:
        """Why a network of ``n_inputs`` inputs does not fit (for an update's error)."""
        if not self.width:
            return ""
        return (f" (agent_id: one_hot appends one input per slot of the agent: this muscle "
                f"serves {self.width} ({', '.join(self.slots)}), so its network takes "
                f"{observation_size} + {self.width}; the brain's takes {n_inputs}, so its "
                f"muscles serve other slots. Give the agent the same slot ids in every "
                f"environment, and self-play the same number of slots)")


def load_mlp(path: str, shape: tuple[int, int], owner: str) -> MLP:
    """The ``mlp`` checkpoint at ``path`` as an :class:`MLP`; MosaicError if it is another kind
    or maps other sizes than ``shape`` (inputs, actions)."""
    policy = load_policy(path)
    if not isinstance(policy, MLPPolicy):
        raise MosaicError(f"{owner}: {path} is a {policy.kind!r} checkpoint, not an mlp")
    if (policy.n_inputs, policy.n_actions) != shape:
        raise MosaicError(f"{owner}: the mlp in {path} maps {policy.n_inputs} inputs to "
                          f"{policy.n_actions} actions; the slots need {shape[0]} to {shape[1]}")
    return MLP.from_layers(policy.layers)


def mlp_from_update(update: Any, shape: tuple[int, int], what: str, why: str = "") -> MLP:
    """The network in a brain's ``update`` (its arrays); MosaicError if it is malformed or maps
    other sizes than ``shape`` (inputs, actions) — ``what`` names it in the message, ``why``
    ends it."""
    try:
        network = MLP.from_arrays(update)
    except (ValueError, TypeError) as exc:
        raise MosaicError(f"malformed {what} update: {exc}") from exc
    if (network.n_inputs, network.n_outputs) != shape:
        raise MosaicError(f"the update maps {network.n_inputs} inputs to {network.n_outputs} "
                          f"actions; this muscle needs {shape[0]} to {shape[1]}{why}")
    return network


def update_inputs(update: Any) -> int:
    """The inputs of the network in a brain's ``update`` (-1 if it has no ``W0``)."""
    first = update.get("W0") if isinstance(update, Mapping) else None
    return int(np.shape(first)[0]) if first is not None and np.ndim(first) == 2 else -1


class RestorableState:
    """``load_state`` for a brain whose :meth:`state` arrays its ``_load`` puts back: all of
    them or, on a missing or misshaped array, none (MosaicError)."""

    def state(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        raise NotImplementedError

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state` returned (same layer sizes).

        Raises ``MosaicError`` if an array is missing or misshaped; then nothing changed.
        """
        before = self.state()
        try:
            self._load(state)
        except (KeyError, ValueError) as exc:
            self._load(before)
            raise MosaicError(f"{type(self).__name__} cannot load this state: {exc}") from exc


def pack_records(records: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, np.ndarray]:
    """``records`` (episodes or segments a learner holds between updates: mappings of arrays,
    numbers, bools and ``None``) as flat state arrays ``<prefix><i>.<field>``, with
    ``<prefix>count``; a ``None`` field is left out."""
    arrays = {f"{prefix}count": np.array(len(records), dtype=np.int64)}
    for index, record in enumerate(records):
        for name, value in record.items():
            if value is not None:
                arrays[f"{prefix}{index}.{name}"] = np.asarray(value)
    return arrays


def unpack_records(state: Mapping[str, np.ndarray], prefix: str,
                   names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The records :func:`pack_records` saved, each with ``names`` (``None`` where left out;
    0-d arrays as Python scalars). A state without them gives none."""
    if f"{prefix}count" not in state:
        return []
    records = []
    for index in range(int(state[f"{prefix}count"])):
        record: dict[str, Any] = {}
        for name in names:
            value = state.get(f"{prefix}{index}.{name}")
            record[name] = value.item() if value is not None and value.ndim == 0 else value
        records.append(record)
    return records


def rollout_state(closed: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """A PPO muscle's rollout so far as state: its ended segments (``closed.*``, each with
    its ``actions``) and ``steps``, their number of steps."""
    state = pack_records(closed, "closed.")
    state["steps"] = np.array(sum(len(segment["actions"]) for segment in closed),
                              dtype=np.int64)
    return state


def saved_rollout(state: Mapping[str, np.ndarray], fields: tuple[str, ...],
                  owner: str) -> tuple[list[dict[str, Any]], int]:
    """The ended segments (with ``fields``) and steps :func:`rollout_state` saved;
    ``MosaicError`` naming ``owner`` when ``state`` is not such a state."""
    if "steps" not in state:
        raise MosaicError(f"{owner} state needs 'steps'; got {sorted(state)}")
    return unpack_records(state, "closed.", fields), int(state["steps"])
