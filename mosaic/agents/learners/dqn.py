"""Deep Q-learning (DQN, optionally Double DQN) for Box observations and Discrete actions, on the
NumPy :class:`~mosaic.agents.learners.MLP`.

The muscle acts epsilon-greedily on its copy of the online network and sends its transitions;
the brain keeps them in a replay buffer, trains the online network against a target network, and
answers with the online weights every ``sync_every`` updates. Params: :mod:`.dqn_params`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from mosaic.agents.batch import Batch
from mosaic.agents.brain import Brain
from mosaic.agents.context import BrainContext, MuscleContext, Slot
from mosaic.agents.learners._common import (
    AgentIds,
    RestorableState,
    SlotSpaces,
    legal_mask,
    legal_masks,
    load_mlp,
    mlp_from_update,
    policy_shape,
    unwrap,
    update_inputs,
)
from mosaic.agents.learners.mlp import MLP, Adam, masked_max
from mosaic.agents.learners.pending_copies import PendingCopies
from mosaic.agents.learners.replay import ReplayBuffer, ReplayLearner, Transitions
from mosaic.agents.muscle import Muscle
from mosaic.agents.policies import mlp_arrays, save_mlp
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from mosaic.agents.learners.dqn_params import DQNParams

__all__ = ["DQNBrain", "DQNMuscle"]


def _spaces(slots: Mapping[str, Slot], owner: str) -> tuple[int, int]:
    """(observation size, n_actions); MosaicError for a continuous action space or others."""
    for uid, slot in slots.items():
        if isinstance(slot.action_space, gymnasium.spaces.Box):
            raise MosaicError(f"{owner} needs a Discrete action space; slot {uid!r} has the "
                              f"continuous {slot.action_space} (use a PPO learner for Box actions)")
    return policy_shape(slots, owner)


def _next_mask(legal_actions: Any, n_actions: int) -> np.ndarray | None:
    """The legal actions after a transition; ``None`` (all) also where a game is over and its
    mask allows none: a terminal transition does not bootstrap."""
    if legal_actions is None or not np.asarray(legal_actions).any():
        return None
    return legal_mask(legal_actions, n_actions)


def _params(params: Mapping[str, Any], owner: str) -> DQNParams:
    from mosaic.agents.learners.dqn_params import check_params

    return check_params(params, owner)


class DQNMuscle(SlotSpaces, Muscle):
    """Acts epsilon-greedily on the online Q network and sends transitions to the brain.

    Spaces: every slot has a ``Box`` observation (flattened) and a ``Discrete`` action space
    starting at 0, of the same sizes across slots; a ``Box`` action space is refused at setup.

    Epsilon falls linearly from ``epsilon_start`` to ``epsilon_end`` over ``epsilon_decay_steps``
    of this muscle's env steps (each copy's step counts), then stays. Until the brain's first
    weights arrive (or without ``load_checkpoint``) every Q value is 0, so greedy picks the lowest
    legal action. In ``"test"`` mode it acts greedily and sends nothing.

    Promises: exploration draws only from ``context.rng`` (one uniform per act, one more when it
    explores; in batches two uniforms per copy and step). Actions honour ``legal_actions`` or
    PettingZoo's ``{"observation", "action_mask"}`` observations, when exploring and when greedy.

    Experience: one item of columns (``observations``, ``actions``, ``rewards``,
    ``next_observations``, ``terminated``, ``truncated``, and ``next_masks`` or ``None``); from
    :meth:`feedback` one row per completed action, from :meth:`feedback_batch` one row per copy
    that acted. Rewards that arrive while a slot's observation is ``None`` add to its pending
    transition. ``next_masks`` come from a ``{"observation", "action_mask"}`` next observation,
    and in batches from ``batch.legal_actions``. Where masks come only as ``legal_actions``
    (an environment that gives them in ``info``), the next observation carries none, so a
    transition that does not end the episode waits for the mask of the slot's next
    :meth:`act` and goes with the next item :meth:`feedback` returns: the Q-target's maximum
    is over legal actions either way. Updates: ``W0``, ``b0``, ... and ``version``.

    Several slots (parameter sharing) each keep their own pending transition. With
    ``agent_id: one_hot`` every observation the network sees (the next ones too) ends with the
    slot's one-hot (:class:`~mosaic.agents.learners._common.AgentIds`).

    Metrics: ``epsilon``, per training episode as it starts (per copy's episode with copies).
    """

    slots_spaces = staticmethod(_spaces)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.dqn_params.DQNParams`."""
        from mosaic.agents.learners.dqn_params import DQNParams

        model: type[BaseModel] = DQNParams
        return model

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.observation_size, self.n_actions = _spaces(context.slots, owner)
        self.params = _params(context.params, owner)
        self.ids = AgentIds(context.slots, self.params.agent_id, owner)
        self.n_inputs = self.observation_size + self.ids.width
        self.network: MLP | None = None
        if self.params.load_checkpoint:
            self.network = load_mlp(self.params.load_checkpoint,
                                         (self.n_inputs, self.n_actions), owner)
        self.version = 0
        self.training = context.mode != "test"
        self.rng = context.rng
        self.steps = 0
        # slot -> [observation, action, accumulated reward] of the action awaiting its outcome
        self._pending: dict[str, list[Any]] = {}
        # Whether act() has been given masks as legal_actions; then transitions whose next
        # observation carries no mask wait in _awaiting (slot -> row) for the slot's next
        # act(), and go with the next item feedback() returns (_ready).
        self._masks_apart = False
        self._awaiting: dict[str, dict[str, Any]] = {}
        self._ready: list[dict[str, Any]] = []
        self._copy_pending = PendingCopies(context.copies)

    @property
    def epsilon(self) -> float:
        """The exploration rate at this muscle's current step (0 in test mode)."""
        p = self.params
        if not self.training:
            return 0.0
        fraction = min(1.0, self.steps / p.epsilon_decay_steps) if p.epsilon_decay_steps else 1.0
        return float(p.epsilon_start + fraction * (p.epsilon_end - p.epsilon_start))

    def _values(self, x: np.ndarray) -> np.ndarray:
        if self.network is None:
            return np.zeros((*x.shape[:-1], self.n_actions))
        return self.network.forward(x)

    def _observations(self, observations: Any, copies: int, slot: str) -> np.ndarray:
        """The network's inputs (copies, n_inputs): the observations, then ``slot``'s id."""
        x = np.array(observations, dtype=np.float64).reshape(copies, -1)
        if x.shape[1] != self.observation_size:
            raise MosaicError(f"expected observations of {self.observation_size} values; got "
                              f"{x.shape[1]}")
        return self.ids.appended(x, slot)

    def reset(self) -> None:
        """Start an episode: report its epsilon and forget pending actions."""
        self._pending.clear()
        self._awaiting.clear()
        if self.training:
            self.context.log_metric("epsilon", self.epsilon)

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> int:
        """Epsilon-greedy over the legal actions (greedy in test mode)."""
        observation, legal_actions = unwrap(observation, legal_actions)
        x = self._observations(observation, 1, slot)[0]
        mask = legal_mask(legal_actions, self.n_actions)
        if mask is not None:
            self._masks_apart = True
            waiting = self._awaiting.pop(slot, None)
            if waiting is not None:
                waiting["next_masks"] = mask[None]
                self._ready.append(waiting)
        legal = np.arange(self.n_actions) if mask is None else np.flatnonzero(mask)
        if self.training and self.rng.random() < self.epsilon:
            action = int(legal[self.rng.integers(legal.shape[0])])
        else:
            values = self._values(x)
            action = int(legal[np.argmax(values[legal])])
        if self.training:
            self.steps += 1
            self._pending[slot] = [x, action, 0.0]
        return action

    def feedback(self, slot: str, reward: float, terminated: bool, truncated: bool,
                 observation: Any) -> dict[str, Any] | None:
        """The completed transitions as one item: ``slot``'s last action's and those that
        waited for a mask (see the class docstring); ``None`` when there are none (test mode,
        no observation yet, or a transition waiting for its mask)."""
        pending = self._pending.get(slot)
        if pending is None:
            return self._flush(None)
        pending[2] += float(reward)
        if observation is None and not (terminated or truncated):
            return self._flush(None)
        del self._pending[slot]
        x, action, total = pending
        next_mask = None
        if observation is None:
            next_x, terminated = x, True  # over without a final observation: no bootstrap
        else:
            next_obs, mask = unwrap(observation, None)
            next_x = self._observations(next_obs, 1, slot)[0]
            next_mask = _next_mask(mask, self.n_actions)
        row = {"observations": x[None], "actions": np.array([action], dtype=np.int64),
               "rewards": np.array([total]), "next_observations": next_x[None],
               "terminated": np.array([bool(terminated)]),
               "truncated": np.array([bool(truncated)]),
               "next_masks": None if next_mask is None else next_mask[None]}
        if next_mask is None and self._masks_apart and not (terminated or truncated):
            self._awaiting[slot] = row  # its next act() gives the mask
            return self._flush(None)
        return self._flush(row)

    def _flush(self, row: dict[str, Any] | None) -> dict[str, Any] | None:
        """The transitions that got their mask, then ``row``, as one item (``None``: none)."""
        if not self._ready:
            return row
        rows, self._ready = [*self._ready, *([] if row is None else [row])], []
        if len(rows) == 1:
            return rows[0]
        item = {name: np.concatenate([r[name] for r in rows])
                for name in rows[0] if name != "next_masks"}
        item["next_masks"] = np.concatenate([
            np.ones((1, self.n_actions), bool) if r["next_masks"] is None else r["next_masks"]
            for r in rows])
        return item

    def act_batch(self, slot: str, batch: Batch) -> np.ndarray:
        """Epsilon-greedy per copy over its legal actions, from one forward pass: int64
        (copies,). A copy in ``batch.starts`` begins an episode and reports its epsilon."""
        copies = self._copy_pending.checked(batch)
        observations, legal_actions = unwrap(batch.observations, batch.legal_actions)
        x = self._observations(observations, copies, slot)
        masks = legal_masks(legal_actions, self.n_actions, copies)
        legal = np.ones((copies, self.n_actions), bool) if masks is None else masks
        epsilon = self.epsilon
        if self.training:
            for _ in range(int(np.count_nonzero(batch.starts))):
                self.context.log_metric("epsilon", epsilon)
        self._copy_pending.starts(batch.starts)
        actions, _ = masked_max(self._values(x), legal)
        if not self.training:
            return actions.astype(np.int64)
        explore = self.rng.random(copies) < epsilon
        picks = self.rng.random(copies)
        counts = legal.sum(axis=1)
        ranks = np.minimum((picks * counts).astype(np.int64), counts - 1)
        random = np.argmax(np.cumsum(legal, axis=1) > ranks[:, None], axis=1)
        actions = np.where(explore, random, actions).astype(np.int64)
        self.steps += copies
        self._copy_pending.hold(slot, x, actions.copy())
        return actions

    def feedback_batch(self, slot: str, batch: Batch) -> list[dict[str, Any]]:
        """The transitions of the copies in ``batch.acted`` with a pending action, as one item;
        an empty list in test mode or when none completed."""
        copies = self._copy_pending.checked(batch)
        x, actions, rows = self._copy_pending.completed(slot, batch)
        if not rows.shape[0]:
            return []
        observations, legal_actions = unwrap(batch.observations, batch.legal_actions)
        next_x = self._observations(observations, copies, slot)
        masks = legal_masks(legal_actions, self.n_actions, copies)
        for copy, final in batch.final_observations.items():
            if final is None:
                continue
            final_obs, final_mask = unwrap(final, None)
            next_x[copy] = self._observations(final_obs, 1, slot)[0]
            if masks is not None:  # the new episode's mask is not the final observation's
                mask = _next_mask(final_mask, self.n_actions)
                masks[copy] = True if mask is None else mask
        return [{"observations": x[rows], "actions": actions[rows],
                 "next_observations": next_x[rows], **PendingCopies.outcomes(batch, rows),
                 "next_masks": None if masks is None else masks[rows]}]

    def apply_update(self, update: Any) -> None:
        """Act with the online weights in ``update`` (``MosaicError`` if they do not fit)."""
        self.network = mlp_from_update(update, (self.n_inputs, self.n_actions), "Q-network",
                                       self.ids.mismatch(update_inputs(update),
                                                         self.observation_size))
        self.version = int(update.get("version", self.version))

    def state(self) -> dict[str, np.ndarray]:
        """``steps``: where the epsilon schedule is."""
        return {"steps": np.array(self.steps, dtype=np.int64)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue the epsilon schedule from ``state["steps"]`` (``MosaicError`` if missing)."""
        if "steps" not in state:
            raise MosaicError(f"{type(self).__name__} state needs 'steps'; got {sorted(state)}")
        self.steps = int(state["steps"])


class DQNBrain(SlotSpaces, ReplayLearner, RestorableState, Brain):
    """Learns a Q network from replayed transitions, against a target network.

    Spaces: as :class:`DQNMuscle`. Several muscles may share the brain: one buffer, one network.

    Each transition goes into a replay buffer of ``buffer_size``. Once it holds
    ``learning_starts`` transitions, every ``train_every`` transitions make one Adam step on
    ``batch_size`` transitions sampled uniformly (from ``context.rng``), with the Huber loss
    (``huber_delta``) between ``Q(s, a)`` and ``r + discount * (not terminated) * Q'(s')``, where
    ``Q'(s')`` is the target network's value of the online network's best legal action
    (``double_dqn``, the default) or the target's best legal value. Gradients are clipped to the
    global norm ``max_grad_norm`` (0: no clip). The target copies the online network every
    ``target_update_every`` updates, or with ``tau > 0`` moves towards it by ``tau`` at every
    update (Polyak).

    :meth:`learn` answers ``muscle`` with the online weights (``W0``, ``b0``, ..., ``version``)
    when they changed since it last got them and ``sync_every`` updates have passed; else
    ``None``. :meth:`state` holds both networks, the optimizer, the counters, the metric sums
    not reported yet and the replay buffer's transitions (``replay.*``, oldest first), so a
    continued run samples what the saved one would have.

    Metrics, every ``sync_every`` updates, as means over them: ``loss``, ``q_mean`` (the online
    Q of the sampled actions) and ``grad_norm`` (before clipping).
    """

    slots_spaces = staticmethod(_spaces)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.dqn_params.DQNParams` (the muscle's too)."""
        return DQNMuscle.params_model()

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.n_inputs, self.n_actions = _spaces(context.slots, owner)
        p = self.params = _params(context.params, owner)
        self.n_inputs += AgentIds(context.slots, p.agent_id, owner).width
        self.rng = context.rng
        if p.load_checkpoint:
            self.online = load_mlp(p.load_checkpoint, (self.n_inputs, self.n_actions), owner)
        else:
            self.online = MLP([self.n_inputs, *p.hidden_sizes, self.n_actions], self.rng)
        self.target = MLP.from_layers(self.online.layers)
        self.optimizer = Adam(self.online.parameters(), p.learning_rate,
                              max_grad_norm=p.max_grad_norm or None)
        self.buffer = ReplayBuffer(p.buffer_size, self.n_inputs, self.n_actions)
        self.transitions = 0
        self.updates = 0
        # A muscle starts with version 0: all-zero Q values, or the checkpoint it loaded too.
        self.version = 0
        self._sent: dict[str, int] = {}
        self._stats = np.zeros(3)  # loss, q_mean and grad_norm summed since the last report

    # -- learning -------------------------------------------------------------------------
    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray] | None:
        """Store the transitions, train on schedule, answer with weights when due."""
        try:
            batch = Transitions.from_columns(experience, self.n_inputs, self.n_actions)
        except ValueError as exc:
            raise MosaicError(f"{type(self).__name__}: {exc}") from exc
        return self._take(muscle, batch)

    def _update(self) -> None:
        p = self.params
        batch = self.buffer.sample(self.rng, p.batch_size)
        n = len(batch)
        rows = np.arange(n)
        q, inputs = self.online.forward_cached(batch.observations)
        next_target = self.target.forward(batch.next_observations)
        if p.double_dqn:
            best, _ = masked_max(self.online.forward(batch.next_observations), batch.next_masks)
            next_value = next_target[rows, best]
        else:
            _, next_value = masked_max(next_target, batch.next_masks)
        targets = batch.rewards + p.discount * np.where(batch.terminated, 0.0, next_value)
        q_taken = q[rows, batch.actions]
        error = q_taken - targets
        small = np.abs(error) <= p.huber_delta
        loss = np.where(small, 0.5 * error**2,
                        p.huber_delta * (np.abs(error) - 0.5 * p.huber_delta))
        grad_out = np.zeros_like(q)
        grad_out[rows, batch.actions] = np.clip(error, -p.huber_delta, p.huber_delta) / n
        grads = self.online.backward(inputs, grad_out)
        grad_norm = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
        self.optimizer.step(grads)
        self.updates += 1
        if p.tau > 0:
            for target, online in zip(self.target.parameters(), self.online.parameters(),
                                      strict=True):
                target += p.tau * (online - target)
        elif self.updates % p.target_update_every == 0:
            self.target.load_arrays(self.online.to_arrays())
        self._stats += (float(loss.mean()), float(q_taken.mean()), grad_norm)
        if self.updates % p.sync_every == 0:
            self.version += 1
            for name, total in zip(("loss", "q_mean", "grad_norm"), self._stats, strict=True):
                self.context.log_metric(name, total / p.sync_every)
            self._stats[:] = 0.0

    # -- weights and state ----------------------------------------------------------------
    def sync(self, muscle: str) -> dict[str, np.ndarray]:
        """The online network, for a muscle that starts (a test phase after training)."""
        self._sent[muscle] = self.version
        return self.weights()

    def weights(self) -> dict[str, np.ndarray]:
        """The online network as an update: ``W0``, ``b0``, ... and ``version`` (0-d)."""
        arrays = self.online.to_arrays()
        arrays["version"] = np.array(self.version, dtype=np.int64)
        return arrays

    def state(self) -> dict[str, np.ndarray]:
        """Both networks (``online.*``, ``target.*``), the optimizer (``adam.*``) and the
        counters ``transitions``, ``updates`` and ``version``; all copies."""
        return {**self.online.to_arrays("online."), **self.target.to_arrays("target."),
                **self.optimizer.state("adam."), **self._replay_state()}

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        self.online.load_arrays(state, "online.")
        self.target.load_arrays(state, "target.")
        self.optimizer.load_state(state, "adam.")
        self._load_replay_state(state)

    def greedy_policy(self) -> dict[str, np.ndarray]:
        """The online network as an ``mlp`` policy (its arg-max is the greedy action)."""
        return mlp_arrays(self.online.layers)

    def greedy_checkpoint(self, path: str | os.PathLike[str]) -> Path:
        """Write the online network as an ``mlp`` checkpoint (:mod:`mosaic.agents.policies`):
        its arg-max is the greedy action. Returns the path written (``.npz`` appended)."""
        return save_mlp(path, self.online.layers)

    def teardown(self) -> None:
        """In ``"train"`` mode, write the checkpoint named by ``save_checkpoint``, if any."""
        if self.params.save_checkpoint is not None and self.context.mode != "test":
            self.greedy_checkpoint(self.params.save_checkpoint)
