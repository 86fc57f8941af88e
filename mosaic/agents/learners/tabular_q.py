"""Tabular Q-learning for discrete observation and action spaces (FrozenLake, Taxi, ...).

The muscle acts epsilon-greedily on its own copy of the Q table and sends each transition to the
brain; the brain applies the Q-learning update and sends the whole table back on its schedule.
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
from mosaic.agents.learners._common import SlotSpaces, shared_shape
from mosaic.agents.learners._common import legal_mask as _legal_mask
from mosaic.agents.learners._common import legal_masks as _legal_masks
from mosaic.agents.learners._common import unwrap as _unwrap
from mosaic.agents.learners.pending_copies import PendingCopies
from mosaic.agents.muscle import Muscle
from mosaic.agents.policies import QTablePolicy, load_policy, q_table_arrays, save_q_table
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from mosaic.agents.learners.tabular_q_params import TabularQParams

__all__ = ["TabularQBrain", "TabularQMuscle", "Transition", "TransitionBatch"]

Transition = tuple[int, int, float, int, bool, bool]
"""``(state, action, reward, next_state, terminated, truncated)``, as plain Python values."""

TransitionBatch = dict[str, np.ndarray]
"""Transitions of several copies in one item: ``states``, ``actions`` and ``next_states``
(K,) int64, ``rewards`` (K,) float64, ``terminated`` and ``truncated`` (K,) bool; row ``i`` is
one :data:`Transition`, and the rows are learnt in order."""

_TRANSITION_FIELDS = ("states", "actions", "rewards", "next_states", "terminated", "truncated")


def _params(params: Mapping[str, Any], owner: str) -> TabularQParams:
    from mosaic.agents.learners.tabular_q_params import check_tabular_q_params

    return check_tabular_q_params(params, owner)


def _params_model() -> type[BaseModel]:
    from mosaic.agents.learners.tabular_q_params import TabularQParams

    model: type[BaseModel] = TabularQParams
    return model


def _table_shape(slots: Mapping[str, Slot], owner: str) -> tuple[int, int]:
    """(n_states, n_actions) shared by all ``slots``; raises MosaicError for other spaces."""
    def sizes(uid: str, obs: gymnasium.Space[Any],
              act: gymnasium.Space[Any]) -> tuple[int, int]:
        if not (isinstance(obs, gymnasium.spaces.Discrete)
                and isinstance(act, gymnasium.spaces.Discrete)):
            raise MosaicError(
                f"{owner} needs Discrete observation and action spaces; slot {uid!r} has "
                f"{obs} and {act} (use PolicyGradientBrain for Box observations)")
        if int(obs.start) != 0 or int(act.start) != 0:
            raise MosaicError(f"{owner} needs Discrete spaces starting at 0; slot {uid!r} has "
                              f"{obs} and {act}")
        return int(obs.n), int(act.n)

    return shared_shape(slots, owner, sizes, "table", "space sizes")


def _state_index(observation: Any, n_states: int) -> int:
    value = np.asarray(observation)
    if value.size != 1 or value.dtype.kind not in "iu":
        raise MosaicError(f"expected a state index, got {observation!r:.80}")
    index = int(value.reshape(()))
    if not 0 <= index < n_states:
        raise MosaicError(f"state {index} outside 0..{n_states - 1}")
    return index


def _state_indices(observations: Any, n_states: int, copies: int) -> np.ndarray:
    """The state index of each of ``copies`` copies, as int64 (copies,)."""
    values = np.asarray(observations)
    if values.dtype.kind not in "iu" or values.size != copies or values.shape[:1] != (copies,):
        raise MosaicError(f"expected {copies} state indices, got {observations!r:.80}")
    indices = values.reshape(copies).astype(np.int64)
    outside = np.flatnonzero((indices < 0) | (indices >= n_states))
    if outside.shape[0]:
        raise MosaicError(f"state {int(indices[outside[0]])} of copy {int(outside[0])} outside "
                          f"0..{n_states - 1}")
    return indices


def _load_table(path: str, shape: tuple[int, int], owner: str) -> np.ndarray:
    policy = load_policy(path)
    if not isinstance(policy, QTablePolicy):
        raise MosaicError(f"{owner}: {path} is an {policy.kind!r} checkpoint, not a q_table")
    if policy.q.shape != shape:
        raise MosaicError(f"{owner}: the table in {path} has shape {policy.q.shape}; the slots "
                          f"need {shape}")
    return policy.q.copy()


class TabularQMuscle(SlotSpaces, Muscle):
    """Acts epsilon-greedily on a local copy of the Q table and sends transitions.

    Spaces: every slot has a ``Discrete`` observation (a state index) and a ``Discrete`` action
    space, both starting at 0 and of the same sizes across slots (they share one table).

    Params (``context.params``, all optional; checked with
    :class:`~mosaic.agents.learners.tabular_q_params.TabularQParams`, which the brain shares):

    * ``epsilon_start`` (1.0), ``epsilon_end`` (0.05), ``epsilon_decay_episodes`` (200):
      exploration falls linearly from start to end over that many of this muscle's episodes,
      then stays at the end value. ``epsilon`` (unset) fixes it at one value instead.
    * ``load_checkpoint`` (unset): a ``q_table`` checkpoint (``.npz``) to act on from the start,
      for test runs; give it at agent level so that the brain starts from it too.

    Promises: exploration and tie-breaking draw only from ``context.rng``, so the same seed and
    the same observations give the same actions. Actions honour ``legal_actions`` (a mask of
    length n_actions, or PettingZoo's ``{"observation", "action_mask"}`` observation). In
    ``"test"`` mode it acts greedily (ties go to the lowest action, as in the checkpoint format)
    and :meth:`feedback` returns ``None``: nothing is learnt.

    Experience: one :data:`Transition` per completed action, sent from :meth:`feedback`.
    Rewards that arrive while the slot's observation is ``None`` (another slot's turn) are added
    to its pending transition, which completes at the next feedback with an observation or at
    episode end. Updates: ``{"q": table}`` replaces the local table.

    Copies (``context.copies``): :meth:`act_batch` acts for every copy in one vectorised pass on
    the same table, and :meth:`feedback_batch` sends the transitions completed at that step as
    one :data:`TransitionBatch` (rows in copy order). Each copy keeps its own pending action and
    the epsilon of its own episode; the decay counts the episodes of all copies, as they are all
    this muscle's episodes. Its draws (two uniforms per copy and step, from ``context.rng``)
    differ from the single-step ones, so a run with copies is reproducible but does not replay
    a run without.

    Metrics: ``epsilon``, the exploration rate of each episode as it starts (in ``"train"``
    mode; with copies, one per copy's episode).

    State (:meth:`state`): ``episodes``, the count the epsilon schedule is at; with the
    generator saved beside it, a continued run explores exactly as the saved one would have.
    """

    slots_spaces = staticmethod(_table_shape)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.tabular_q_params.TabularQParams`."""
        return _params_model()

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        params = _params(context.params, type(self).__name__)
        self.n_states, self.n_actions = _table_shape(context.slots, type(self).__name__)
        start, end = params.epsilon_start, params.epsilon_end
        if params.epsilon is not None:
            start = end = params.epsilon
        self.epsilon_start, self.epsilon_end = start, end
        self.epsilon_decay_episodes = params.epsilon_decay_episodes
        checkpoint = params.load_checkpoint
        if checkpoint:
            self.q = _load_table(checkpoint, (self.n_states, self.n_actions),
                                 type(self).__name__)
        else:
            self.q = np.zeros((self.n_states, self.n_actions))
        self.training = context.mode != "test"
        self.rng = context.rng
        self.episodes = 0
        self.epsilon = self._epsilon()
        # slot -> [state, action, accumulated reward] of the action awaiting its outcome
        self._pending: dict[str, list[Any]] = {}
        # For copies: each copy's episode epsilon, and its state and action awaiting an outcome.
        self._copy_epsilons = np.full(context.copies, self.epsilon)
        self._copy_pending = PendingCopies(context.copies)

    def _epsilon(self) -> float:
        if not self.training:
            return 0.0
        if self.episodes >= self.epsilon_decay_episodes:
            return self.epsilon_end
        fraction = self.episodes / self.epsilon_decay_episodes
        return self.epsilon_start + fraction * (self.epsilon_end - self.epsilon_start)

    def reset(self) -> None:
        """Start an episode: set this episode's epsilon and forget pending actions."""
        self.epsilon = self._epsilon()
        self.episodes += 1
        self._pending.clear()
        if self.training:
            self.context.log_metric("epsilon", self.epsilon)

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> int:
        """Epsilon-greedy over the legal actions (greedy in test mode)."""
        observation, legal_actions = _unwrap(observation, legal_actions)
        state = _state_index(observation, self.n_states)
        mask = _legal_mask(legal_actions, self.n_actions)
        legal = np.arange(self.n_actions) if mask is None else np.flatnonzero(mask)
        if self.training and self.rng.random() < self.epsilon:
            action = int(legal[self.rng.integers(legal.shape[0])])
        else:
            values = self.q[state, legal]
            best = legal[values == values.max()]
            # Random tie-breaking keeps an untrained table from always trying the same action.
            pick = self.rng.integers(best.shape[0]) if self.training and best.shape[0] > 1 else 0
            action = int(best[pick])
        if self.training:
            self._pending[slot] = [state, action, 0.0]
        return action

    def feedback(
        self,
        slot: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        observation: Any,
    ) -> Transition | None:
        """The completed transition of ``slot``'s last action, or ``None`` (test mode, or no
        observation yet)."""
        pending = self._pending.get(slot)
        if pending is None:
            return None
        pending[2] += float(reward)
        done = bool(terminated or truncated)
        if observation is None and not done:
            return None
        del self._pending[slot]
        state, action, total = pending
        if observation is None:
            next_state = state  # episode over without a final observation: nothing to bootstrap
            terminated = True
        else:
            next_state = _state_index(_unwrap(observation, None)[0], self.n_states)
        return (state, action, total, next_state, bool(terminated), bool(truncated))

    def act_batch(self, slot: str, batch: Batch) -> np.ndarray:
        """Epsilon-greedy over each copy's legal actions (greedy in test mode): int64 (copies,).

        A copy in ``batch.starts`` begins an episode first, as :meth:`reset` begins one: it gets
        that episode's epsilon and forgets its pending actions.
        """
        copies = self._copy_pending.checked(batch)
        observations, legal_actions = _unwrap(batch.observations, batch.legal_actions)
        states = _state_indices(observations, self.n_states, copies)
        masks = _legal_masks(legal_actions, self.n_actions, copies)
        for copy in np.flatnonzero(batch.starts).tolist():
            self._copy_epsilons[copy] = self._epsilon()
            self.episodes += 1
            if self.training:
                self.context.log_metric("epsilon", self._copy_epsilons[copy])
        self._copy_pending.starts(batch.starts)
        values = self.q[states]
        if masks is not None:
            values = np.where(masks, values, -np.inf)
        if not self.training:
            greedy: np.ndarray = np.argmax(values, axis=1).astype(np.int64)
            return greedy  # ties go to the lowest
        explore = self.rng.random(copies) < self._copy_epsilons
        picks = self.rng.random(copies)
        # Each copy draws uniformly among its candidates: the legal actions when it explores,
        # else its best ones (random tie-breaking, as in act).
        best = values == values.max(axis=1, keepdims=True)
        legal = np.ones_like(best) if masks is None else masks
        candidates = np.where(explore[:, None], legal, best)
        counts = candidates.sum(axis=1)
        ranks = np.minimum((picks * counts).astype(np.int64), counts - 1)
        chosen = np.argmax(np.cumsum(candidates, axis=1) > ranks[:, None], axis=1)
        actions: np.ndarray = chosen.astype(np.int64)
        self._copy_pending.hold(slot, states, actions.copy())
        return actions

    def feedback_batch(self, slot: str, batch: Batch) -> list[TransitionBatch]:
        """The transitions of the copies in ``batch.acted`` with a pending action, as one
        :data:`TransitionBatch`; an empty list in test mode or when none completed."""
        copies = self._copy_pending.checked(batch)
        states, actions, rows = self._copy_pending.completed(slot, batch)
        if not rows.shape[0]:
            return []
        next_states = _state_indices(_unwrap(batch.observations, None)[0], self.n_states, copies)
        for copy, final in batch.final_observations.items():
            if final is not None:
                next_states[copy] = _state_index(_unwrap(final, None)[0], self.n_states)
        return [{"states": states[rows], "actions": actions[rows],
                 "next_states": next_states[rows], **PendingCopies.outcomes(batch, rows)}]

    def apply_update(self, update: Any) -> None:
        """Replace the local table with ``update["q"]`` (``MosaicError`` if it has another
        shape)."""
        q = np.asarray(update["q"], dtype=np.float64)
        if q.shape != self.q.shape:
            raise MosaicError(f"update table of shape {q.shape}; this muscle needs {self.q.shape}")
        self.q = q.copy()

    def state(self) -> dict[str, np.ndarray]:
        """``episodes``: the episodes begun, which set the next one's epsilon."""
        return {"episodes": np.array(self.episodes, dtype=np.int64)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue the epsilon schedule from ``state["episodes"]`` (``MosaicError`` if
        missing)."""
        if "episodes" not in state:
            raise MosaicError(f"{type(self).__name__} state needs 'episodes'; got "
                              f"{sorted(state)}")
        self.episodes = int(state["episodes"])
        self.epsilon = self._epsilon()


class TabularQBrain(SlotSpaces, Brain):
    """Learns a Q table with one-step Q-learning from the transitions its muscles send.

    Spaces: as :class:`TabularQMuscle`. Several muscles may share the brain: they update one
    table.

    Params (``context.params``, all optional; checked with
    :class:`~mosaic.agents.learners.tabular_q_params.TabularQParams`, which the muscle shares):

    * ``learning_rate`` (0.1): step size ``alpha`` in ``(0, 1]``.
    * ``discount`` (0.99): ``gamma`` in ``[0, 1]``.
    * ``update_every`` (0): answer a muscle with the full table after every this many of its
      transitions; ``0`` answers at the end of each of its episodes (terminated or truncated).
    * ``initial_value`` (0.0): the value every entry starts at.
    * ``load_checkpoint`` (unset): start from the table of a ``q_table`` checkpoint.
    * ``save_checkpoint`` (unset): in ``"train"`` mode, write :meth:`greedy_checkpoint` there at
      teardown, so that a run under ``mosaic experiment-start`` leaves a policy the RL worker
      (or a test run's ``load_checkpoint``) can play.

    Update: ``Q[s, a] += alpha * (r + gamma * max Q[s'] * (not terminated) - Q[s, a])``; a
    truncated episode still bootstraps from ``s'``. :meth:`learn` takes a :data:`Transition` or
    a :data:`TransitionBatch` (what a muscle with copies sends), whose rows count as that many
    transitions, learnt in order. It returns ``{"q": copy}`` on the schedule and ``None``
    otherwise. :meth:`state` is the table ``q``, the count of ``updates`` and each muscle's
    transitions since its last answer (``since_update/<muscle>``); the TD errors awaiting
    their report (none between episodes) are not part of it.

    Metrics, whenever a muscle's transitions end an episode: ``td_error``, the mean absolute
    TD error of that muscle's transitions since its last report, and ``updates``, the Q updates
    the brain has made in all.
    """

    slots_spaces = staticmethod(_table_shape)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.tabular_q_params.TabularQParams`."""
        return _params_model()

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        params = _params(context.params, type(self).__name__)
        self.n_states, self.n_actions = _table_shape(context.slots, type(self).__name__)
        self.learning_rate = params.learning_rate
        self.discount = params.discount
        self.update_every = params.update_every
        checkpoint = params.load_checkpoint
        if checkpoint:
            self.q = _load_table(checkpoint, (self.n_states, self.n_actions),
                                 type(self).__name__)
        else:
            self.q = np.full((self.n_states, self.n_actions), params.initial_value)
        self.save_path: str | None = params.save_checkpoint or None
        self._since_update: dict[str, int] = {}
        self.updates = 0
        # muscle -> [sum of |TD error|, transitions] since its last report
        self._td: dict[str, list[float]] = {}
        self._td_sum = 0.0

    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray] | None:
        """Apply one Q-learning update per transition; return ``{"q": table}`` when
        ``muscle``'s turn is due."""
        if isinstance(experience, Mapping):
            return self._learn_batch(muscle, experience)
        try:
            state, action, reward, next_state, terminated, truncated = experience
            state, action, next_state = int(state), int(action), int(next_state)
            reward = float(reward)
        except (TypeError, ValueError) as exc:
            raise MosaicError(f"{type(self).__name__} expects (state, action, reward, "
                              f"next_state, terminated, truncated); got "
                              f"{experience!r:.120}") from exc
        if not (0 <= state < self.n_states and 0 <= next_state < self.n_states
                and 0 <= action < self.n_actions):
            raise MosaicError(f"transition {experience!r} outside the table "
                              f"({self.n_states} states, {self.n_actions} actions)")
        self._update(state, action, reward, next_state, bool(terminated))
        self._report(muscle, 1, bool(terminated or truncated))
        return self._answer(muscle, 1, bool(terminated or truncated))

    def _learn_batch(self, muscle: str, experience: Mapping[str, Any]
                     ) -> dict[str, np.ndarray] | None:
        try:
            states, actions, next_states = (np.asarray(experience[name], dtype=np.int64)
                                            for name in ("states", "actions", "next_states"))
            rewards = np.asarray(experience["rewards"], dtype=np.float64)
            terminated = np.asarray(experience["terminated"], dtype=bool)
            truncated = np.asarray(experience["truncated"], dtype=bool)
        except (KeyError, TypeError, ValueError) as exc:
            raise MosaicError(f"{type(self).__name__} expects a transition batch with "
                              f"{', '.join(_TRANSITION_FIELDS)}; got {experience!r:.120}") from exc
        columns = (states, actions, rewards, next_states, terminated, truncated)
        if states.ndim != 1 or any(column.shape != states.shape for column in columns):
            raise MosaicError(f"a transition batch needs columns of one length; got shapes "
                              f"{[column.shape for column in columns]}")
        if states.shape[0] and not (
                min(states.min(), next_states.min()) >= 0
                and max(states.max(), next_states.max()) < self.n_states
                and actions.min() >= 0 and actions.max() < self.n_actions):
            raise MosaicError(f"a transition batch outside the table ({self.n_states} states, "
                              f"{self.n_actions} actions)")
        # Plain Python values, so that each row is learnt exactly as a Transition would be.
        for row in zip(states.tolist(), actions.tolist(), rewards.tolist(),
                       next_states.tolist(), terminated.tolist(), strict=True):
            self._update(*row)
        ended = bool((terminated | truncated).any())
        self._report(muscle, states.shape[0], ended)
        return self._answer(muscle, states.shape[0], ended)

    def _update(self, state: int, action: int, reward: float, next_state: int,
                terminated: bool) -> None:
        target = reward
        if not terminated:
            target += self.discount * float(self.q[next_state].max())
        error = target - self.q[state, action]
        self.q[state, action] += self.learning_rate * error
        self._td_sum += abs(float(error))
        self.updates += 1

    def _report(self, muscle: str, transitions: int, ended: bool) -> None:
        """Count the TD errors of ``muscle``'s last ``transitions``; at an episode end, report
        their mean since the last report, and the updates so far."""
        totals = self._td.setdefault(muscle, [0.0, 0])
        totals[0] += self._td_sum
        totals[1] += transitions
        self._td_sum = 0.0
        if ended and totals[1]:
            self.context.log_metric("td_error", totals[0] / totals[1])
            self.context.log_metric("updates", self.updates)
            totals[0], totals[1] = 0.0, 0

    def _answer(self, muscle: str, transitions: int, ended: bool) -> dict[str, np.ndarray] | None:
        """The table if ``muscle``'s turn is due after ``transitions`` more (``ended``: one of
        them ended an episode)."""
        count = self._since_update.get(muscle, 0) + transitions
        due = (count >= self.update_every) if self.update_every else ended
        if due:
            self._since_update[muscle] = 0
            return {"q": self.q.copy()}
        self._since_update[muscle] = count
        return None

    def sync(self, muscle: str) -> dict[str, np.ndarray]:
        """The current table, for a muscle that starts (a test phase after training)."""
        return {"q": self.q.copy()}

    def state(self) -> dict[str, np.ndarray]:
        """A copy of the table ``q``, ``updates`` and ``since_update/<muscle>``."""
        state = {"q": self.q.copy(), "updates": np.array(self.updates, dtype=np.int64)}
        for muscle, count in self._since_update.items():
            state[f"since_update/{muscle}"] = np.array(count, dtype=np.int64)
        return state

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state` returned; ``MosaicError`` if the table's shape differs.
        The counters of a state saved without them start at 0."""
        q = np.asarray(state["q"], dtype=np.float64)
        if q.shape != self.q.shape:
            raise MosaicError(f"state table of shape {q.shape}; this brain needs {self.q.shape}")
        self.q = q.copy()
        self.updates = int(state.get("updates", 0))
        self._since_update = {name.partition("/")[2]: int(value) for name, value in state.items()
                              if name.startswith("since_update/")}

    def greedy_policy(self) -> dict[str, np.ndarray]:
        """The table as a ``q_table`` policy."""
        return q_table_arrays(self.q)

    def greedy_checkpoint(self, path: str | os.PathLike[str]) -> Path:
        """Write the table as a ``q_table`` checkpoint (:mod:`mosaic.agents.policies`).

        Returns the path written (``.npz`` appended if missing).
        """
        return save_q_table(path, self.q)

    def teardown(self) -> None:
        """In ``"train"`` mode, write the checkpoint named by ``save_checkpoint``, if any.

        A test run never writes it, so it cannot overwrite a trained table with an untrained one.
        """
        if self.save_path is not None and self.context.mode != "test":
            self.greedy_checkpoint(self.save_path)
