"""TD3 (twin delayed deep deterministic policy gradient) for Box observations and bounded Box
actions (Pendulum, MountainCarContinuous, ...), on the NumPy :class:`~mosaic.agents.learners.MLP`.

The muscle acts with the deterministic actor plus Gaussian or Ornstein-Uhlenbeck noise
(``noise``) and sends its transitions; the brain replays them, trains twin critics against
target networks with target policy smoothing, updates the actor every ``policy_delay`` updates,
and answers with the actor's weights. Params:
:class:`~mosaic.agents.learners.actor_critic_params.TD3Params`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from mosaic.agents.context import MuscleContext
from mosaic.agents.learners.actor_critic import ActorCriticMuscle
from mosaic.agents.learners.actor_critic_brain import ActorCriticBrain
from mosaic.agents.learners.exploration_noise import OrnsteinUhlenbeck
from mosaic.agents.learners.mlp import MLP, Adam
from mosaic.agents.learners.replay import Transitions

if TYPE_CHECKING:
    from mosaic.agents.learners.actor_critic_params import TD3Params

__all__ = ["TD3Brain", "TD3Muscle"]

# The actor's last layer starts small, so its first actions are near the middle of the range.
_ACTOR_OUTPUT_GAIN = 0.01


class TD3Muscle(ActorCriticMuscle):
    """Acts with ``tanh(actor(observation))`` plus noise (clipped to [-1, 1]), scaled to the
    action space's bounds; greedy (no noise) in test mode. The noise (``noise``) is Gaussian of
    standard deviation ``exploration_noise``, or an Ornstein-Uhlenbeck process of that
    ``sigma`` (with ``noise_theta``, ``noise_dt``) for each slot, copy and action value,
    restarted at 0 when its episode begins; its values are part of :meth:`state`. Spaces,
    experience, updates: as :class:`~mosaic.agents.learners.actor_critic.ActorCriticMuscle` (a
    Discrete action space is refused at setup). Before the brain's first weights it acts around
    the range's middle.

    Promises: one standard normal per action value and step from ``context.rng``, whichever the
    noise (uniforms during ``random_steps``).
    """

    params_name = "TD3Params"
    params: TD3Params

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        p = self.params
        self._rows = {slot: i for i, slot in enumerate(sorted(context.slots))}
        self._process = (None if p.noise == "gaussian" else OrnsteinUhlenbeck(
            (len(self._rows), context.copies, self.spaces.n_actions), p.exploration_noise,
            p.noise_theta, p.noise_dt))

    def _explore(self, outputs: np.ndarray, slot: str) -> np.ndarray:
        if self._process is None:
            noise = self.rng.standard_normal(outputs.shape) * self.params.exploration_noise
        else:
            noise = self._process.step(self.rng, (self._rows[slot], slice(0, outputs.shape[0])))
        actions: np.ndarray = np.clip(np.tanh(outputs) + noise, -1.0, 1.0)
        return actions

    def reset(self) -> None:
        """Start an episode: forget pending actions; the noise starts at 0."""
        super().reset()
        if self._process is not None:
            self._process.restart()

    def _copies_begin(self, slot: str, starts: np.ndarray) -> None:
        if self._process is not None:
            self._process.restart((self._rows[slot], np.asarray(starts, dtype=bool)))

    def state(self) -> dict[str, np.ndarray]:
        """``steps`` (see :class:`ActorCriticMuscle`) and, with Ornstein-Uhlenbeck noise,
        ``noise``: its values (slots in sorted order, copies, action values)."""
        state = super().state()
        if self._process is not None:
            state["noise"] = self._process.values.copy()
        return state

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue from ``state``; without ``noise`` (saved with Gaussian noise) the
        Ornstein-Uhlenbeck noise starts at 0."""
        super().load_state(state)
        if self._process is not None and "noise" in state:
            self._process.load(state["noise"], f"{type(self).__name__} state 'noise'")

    def _greedy(self, outputs: np.ndarray) -> np.ndarray:
        actions: np.ndarray = np.tanh(outputs)
        return actions


class TD3Brain(ActorCriticBrain):
    """Learns a deterministic actor and twin critics from replayed transitions (Fujimoto et al.,
    2018), with the schedule, replay, state and weights of
    :class:`~mosaic.agents.learners.actor_critic_brain.ActorCriticBrain`.

    Each update: the critics regress on ``r + discount * (not terminated) * min(Q1', Q2')(s',
    a')``, with ``a' = clip(tanh(actor'(s')) + clip(N(0, policy_noise), ±noise_clip), ±1)``
    (target policy smoothing); every ``policy_delay``-th update the actor ascends ``Q1(s,
    tanh(actor(s)))`` and all targets move towards their networks by ``tau``. The networks are
    ``tanh`` MLPs of ``hidden_sizes``, with Adam at ``learning_rate``.

    Metrics, every ``sync_every`` updates, as means: ``critic_loss``, ``q_mean`` (Q1 of the
    sampled transitions) and ``actor_loss`` (-Q1 of the actor's actions, on delayed updates).
    """

    params_name = "TD3Params"
    params: TD3Params
    metric_names = ("critic_loss", "actor_loss", "q_mean")

    def _build_actor(self) -> MLP:
        p = self.params
        actor = MLP([self.spaces.n_inputs, *p.hidden_sizes, self.spaces.n_actions], self.rng,
                    output_gain=_ACTOR_OUTPUT_GAIN)
        self.actor_target = MLP.from_layers(actor.layers)
        self.actor_optimizer = Adam(actor.parameters(), p.learning_rate)
        return actor

    def _train(self, batch: Transitions) -> dict[str, float]:
        p = self.params
        noise = np.clip(self.rng.standard_normal(batch.actions.shape) * p.policy_noise,
                        -p.noise_clip, p.noise_clip)
        next_a = np.clip(np.tanh(self.actor_target.forward(batch.next_observations)) + noise,
                         -1.0, 1.0)
        next_value = self._target_value(batch.next_observations, next_a)
        targets = batch.rewards + p.discount * np.where(batch.terminated, 0.0, next_value)
        critic_loss, q_mean = self._critic_step(batch, targets)
        metrics = {"critic_loss": critic_loss, "q_mean": q_mean}
        if self.updates % p.policy_delay == 0:
            outputs, cache = self.actor.forward_cached(batch.observations)
            actor_loss, grad_outputs = self._actor_gradient(batch.observations, outputs)
            self.actor_optimizer.step(self.actor.backward(cache, grad_outputs))
            metrics["actor_loss"] = actor_loss
            self._polyak((self.actor_target, *self.critic_targets),
                         (self.actor, *self.critics), p.tau)
        return metrics

    def _actor_gradient(self, x: np.ndarray, outputs: np.ndarray) -> tuple[float, np.ndarray]:
        """The actor's loss ``-mean(Q1(s, tanh(outputs)))`` at ``x`` and its gradient with
        respect to ``outputs``."""
        actions = np.tanh(outputs)
        q, dq = self._action_gradient(x, actions, both=False)
        return -float(np.mean(q)), -dq * (1.0 - actions**2) / actions.shape[0]

    def _extra_state(self) -> dict[str, np.ndarray]:
        return {**self.actor_target.to_arrays("actor_target."),
                **self.actor_optimizer.state("actor_adam.")}

    def _load_extra(self, state: Mapping[str, np.ndarray]) -> None:
        self.actor_target.load_arrays(state, "actor_target.")
        self.actor_optimizer.load_state(state, "actor_adam.")
