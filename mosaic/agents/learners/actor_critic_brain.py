"""The brain that the off-policy actor-critic learners (:mod:`.td3`, :mod:`.sac`) share: one
replay buffer for all its muscles, twin critics with Polyak targets, the update schedule, the
weights its muscles get, metrics and state. Their muscle: :mod:`.actor_critic`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium
import numpy as np

from mosaic.agents.brain import Brain
from mosaic.agents.context import BrainContext
from mosaic.agents.learners._common import AgentIds, RestorableState, SlotSpaces
from mosaic.agents.learners._params import check_params
from mosaic.agents.learners.actor_critic import box_spaces, params_model_of, space_problem
from mosaic.agents.learners.mlp import MLP, Adam
from mosaic.agents.learners.replay import ReplayBuffer, ReplayLearner, Transitions
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["ActorCriticBrain"]


class ActorCriticBrain(SlotSpaces, ReplayLearner, RestorableState, Brain):
    """Replay, twin critics ``Q1``, ``Q2`` (``MLP([observation + action, *hidden_sizes, 1])``)
    with Polyak targets (rate ``tau``), and the schedule; a subclass adds the actor and its
    update (:meth:`_train`).

    Each transition goes into a replay buffer of ``buffer_size``. Once it holds
    ``learning_starts`` transitions, every ``train_every`` transitions make one update on
    ``batch_size`` transitions drawn uniformly from ``context.rng``. Every ``sync_every``
    updates the version goes up and the metrics are reported (means over the updates that
    computed them); :meth:`learn` then answers a muscle that has not got this version with the
    actor's weights. :meth:`state` holds the networks, the optimizers, the counters, the metric
    sums not reported yet and the replay buffer (``replay.*``, oldest first), so a continued run
    goes on as the saved one would have. Muscles get the actor as it was when the version last
    went up.
    """

    slots_spaces = staticmethod(box_spaces)

    #: The model's name in :mod:`.actor_critic_params`.
    params_name: ClassVar[str]
    #: The metrics :meth:`_train` may return, in order.
    metric_names: ClassVar[tuple[str, ...]]

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """The learner's params model (its muscle's too)."""
        model: type[BaseModel] = params_model_of(cls)
        return model

    @classmethod
    def space_problem(cls, who: str, observation: gymnasium.Space[Any],
                      action: gymnasium.Space[Any]) -> str | None:
        """Why this brain cannot learn for ``who`` in these spaces
        (:func:`~mosaic.agents.learners.actor_critic.space_problem`), or ``None``;
        ``mosaic experiment-check`` asks it of every env agent mapped to the agent."""
        return space_problem(cls.__name__, who, observation, action)

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.params = check_params(params_model_of(type(self)), context.params, owner)
        self.spaces = box_spaces(context.slots, owner,
                                 AgentIds(context.slots, self.params.agent_id, owner).width)
        self.rng = context.rng
        p = self.params
        self.actor = self._build_actor()
        sizes = [self.spaces.n_inputs + self.spaces.n_actions, *p.hidden_sizes, 1]
        self.critics = (MLP(sizes, self.rng), MLP(sizes, self.rng))
        self.critic_targets = tuple(MLP.from_layers(c.layers) for c in self.critics)
        self.critic_optimizer = Adam([*self.critics[0].parameters(),
                                      *self.critics[1].parameters()], p.learning_rate)
        self.buffer = ReplayBuffer(p.buffer_size, self.spaces.n_inputs, self.spaces.n_actions,
                                   continuous=True)
        self.transitions = 0
        self.updates = 0
        self.version = 0
        # The actor as of the current version: what muscles get, so that a continued run's
        # muscle acts on the weights the saved run's muscle had.
        self._published = self._publishable()
        self._sent: dict[str, int] = {}
        # Per metric: the sum and the count since the last report.
        self._stats = np.zeros((2, len(self.metric_names)))

    # -- what a subclass provides ---------------------------------------------------------
    def _build_actor(self) -> MLP:
        raise NotImplementedError

    def _train(self, batch: Transitions) -> dict[str, float]:
        """One update on ``batch``; the metrics it computed."""
        raise NotImplementedError

    def _extra_state(self) -> dict[str, np.ndarray]:
        return {}

    def _load_extra(self, state: Mapping[str, np.ndarray]) -> None:
        pass

    def _publishable(self) -> dict[str, np.ndarray]:
        """What muscles get of the actor now (copies): its weights, ``W0``, ``b0``, ...; a
        subclass adds the arrays its muscle acts with besides them."""
        return self.actor.to_arrays()

    # -- critics --------------------------------------------------------------------------
    def _target_value(self, next_x: np.ndarray, next_a: np.ndarray) -> np.ndarray:
        """min(Q1', Q2') of the target critics (N,)."""
        inputs = np.concatenate([next_x, next_a], axis=1)
        q1, q2 = (target.forward(inputs)[:, 0] for target in self.critic_targets)
        value: np.ndarray = np.minimum(q1, q2)
        return value

    def _critic_step(self, batch: Transitions, targets: np.ndarray) -> tuple[float, float]:
        """One Adam step on both critics towards ``targets``; (loss, mean Q1 of the batch).

        The loss is the sum of the critics' halved mean squared errors."""
        inputs = np.concatenate([batch.observations, batch.actions], axis=1)
        n = inputs.shape[0]
        grads, loss, q_mean = [], 0.0, 0.0
        for i, critic in enumerate(self.critics):
            q, cache = critic.forward_cached(inputs)
            error = q[:, 0] - targets
            loss += 0.5 * float(np.mean(error**2))
            if i == 0:
                q_mean = float(np.mean(q))
            grads.extend(critic.backward(cache, error[:, None] / n))
        self.critic_optimizer.step(grads)
        return loss, q_mean

    def _action_gradient(self, x: np.ndarray, a: np.ndarray,
                         both: bool) -> tuple[np.ndarray, np.ndarray]:
        """Q (N,) of the action ``a`` at ``x`` and its gradient dQ/da (N, n_actions): of Q1,
        or with ``both`` of min(Q1, Q2) (the smaller critic's per row)."""
        inputs = np.concatenate([x, a], axis=1)
        critics = self.critics if both else self.critics[:1]
        outs = [critic.forward_cached(inputs) for critic in critics]
        values = np.stack([q[:, 0] for q, _ in outs])
        pick = np.argmin(values, axis=0)
        grad = np.zeros_like(a)
        for i, (critic, (_, cache)) in enumerate(zip(critics, outs, strict=True)):
            chosen = (pick == i).astype(np.float64)[:, None]
            if chosen.any():
                grad += critic.backward_input(cache, chosen)[:, self.spaces.n_inputs:]
        value: np.ndarray = values[pick, np.arange(values.shape[1])]
        return value, grad

    @staticmethod
    def _polyak(targets: tuple[MLP, ...], nets: tuple[MLP, ...], tau: float) -> None:
        for target_net, net in zip(targets, nets, strict=True):
            for target, online in zip(target_net.parameters(), net.parameters(), strict=True):
                target += tau * (online - target)

    # -- learning -------------------------------------------------------------------------
    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray] | None:
        """Store the transitions, train on schedule, answer with the actor when due."""
        try:
            batch = Transitions.from_continuous(experience, self.spaces.n_inputs,
                                                self.spaces.n_actions)
        except ValueError as exc:
            raise MosaicError(f"{type(self).__name__}: {exc}") from exc
        return self._take(muscle, batch)

    def _update(self) -> None:
        p = self.params
        self.updates += 1
        metrics = self._train(self.buffer.sample(self.rng, p.batch_size))
        for i, name in enumerate(self.metric_names):
            if name in metrics:
                self._stats[:, i] += (metrics[name], 1.0)
        if self.updates % p.sync_every == 0:
            self.version += 1
            self._published = self._publishable()
            for i, name in enumerate(self.metric_names):
                if self._stats[1, i]:
                    self.context.log_metric(name, self._stats[0, i] / self._stats[1, i])
            self._stats[:] = 0.0

    # -- weights and state ----------------------------------------------------------------
    def sync(self, muscle: str) -> dict[str, np.ndarray]:
        """The actor, for a muscle that starts (a test phase after training)."""
        self._sent[muscle] = self.version
        return self.weights()

    def weights(self) -> dict[str, np.ndarray]:
        """The actor as of the current version, as an update: ``W0``, ``b0``, ... and
        ``version`` (0-d). Updates between versions change the actor, not what this gives."""
        arrays = {name: array.copy() for name, array in self._published.items()}
        arrays["version"] = np.array(self.version, dtype=np.int64)
        return arrays

    def state(self) -> dict[str, np.ndarray]:
        """The actor (``actor.*``), the critics and their targets (``critic1.*``,
        ``critic1_target.*``, ...), the optimizers (``*adam.*``), the learner's own arrays, the
        counters and the replay buffer (``replay.*``); all copies."""
        state = {**self.actor.to_arrays("actor."),
                 **{f"published.{name}": array.copy() for name, array in self._published.items()},
                 **self.critic_optimizer.state("critic_adam."), **self._extra_state()}
        for i, (critic, target) in enumerate(zip(self.critics, self.critic_targets,
                                                 strict=True)):
            state.update(critic.to_arrays(f"critic{i + 1}."))
            state.update(target.to_arrays(f"critic{i + 1}_target."))
        state.update(self._replay_state())
        return state

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        self.actor.load_arrays(state, "actor.")
        published = MLP.from_layers(self.actor.layers)
        published.load_arrays(state, "published.")
        self._published = published.to_arrays()
        for i, (critic, target) in enumerate(zip(self.critics, self.critic_targets,
                                                 strict=True)):
            critic.load_arrays(state, f"critic{i + 1}.")
            target.load_arrays(state, f"critic{i + 1}_target.")
        self.critic_optimizer.load_state(state, "critic_adam.")
        self._load_extra(state)
        self._load_replay_state(state)
