"""SAC (soft actor-critic) for Box observations and bounded Box actions (Pendulum,
MountainCarContinuous, ...), on the NumPy :class:`~mosaic.agents.learners.MLP`.

The muscle samples from the squashed Gaussian actor and sends its transitions; the brain replays
them, trains twin critics against Polyak targets, the actor against the smaller critic with an
entropy bonus, and the entropy temperature towards a target entropy, and answers with the
actor's weights. Params: :class:`~mosaic.agents.learners.actor_critic_params.SACParams`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from mosaic.agents.learners.actor_critic import ActorCriticMuscle
from mosaic.agents.learners.actor_critic_brain import ActorCriticBrain
from mosaic.agents.learners.mlp import MLP, Adam
from mosaic.agents.learners.replay import Transitions

if TYPE_CHECKING:
    from mosaic.agents.learners.actor_critic_params import SACParams

__all__ = ["SACBrain", "SACMuscle", "squashed_gaussian"]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
_LOG_2PI = float(np.log(2.0 * np.pi))
_EPS = 1e-6  # keeps log(1 - tanh(u)**2) finite where tanh saturates
_ACTOR_OUTPUT_GAIN = 0.01


def squashed_gaussian(outputs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Actions ``tanh(mean + std * noise)`` (N, d) and their log-probabilities (N,), for the
    actor's ``outputs`` (N, 2d): the means, then the log stds (clipped to
    [``LOG_STD_MIN``, ``LOG_STD_MAX``]); ``noise`` (N, d) are standard normal draws."""
    d = noise.shape[1]
    log_std = np.clip(outputs[:, d:], LOG_STD_MIN, LOG_STD_MAX)
    actions = np.tanh(outputs[:, :d] + np.exp(log_std) * noise)
    log_prob = (np.sum(-0.5 * noise**2 - log_std, axis=1) - 0.5 * d * _LOG_2PI
                - np.sum(np.log(1.0 - actions**2 + _EPS), axis=1))
    return actions, log_prob


class SACMuscle(ActorCriticMuscle):
    """Samples from the squashed Gaussian actor (:func:`squashed_gaussian`), scaled to the action
    space's bounds; in test mode it acts with ``tanh(mean)``. Spaces, experience, updates: as
    :class:`~mosaic.agents.learners.actor_critic.ActorCriticMuscle` (a Discrete action space is
    refused at setup). Before the brain's first weights it samples ``tanh(N(0, 1))``.

    Promises: one standard normal per action value and step from ``context.rng`` (uniforms during
    ``random_steps``).
    """

    params_name = "SACParams"
    params: SACParams
    outputs_per_action = 2

    def _explore(self, outputs: np.ndarray, slot: str) -> np.ndarray:
        noise = self.rng.standard_normal((outputs.shape[0], self.spaces.n_actions))
        return squashed_gaussian(outputs, noise)[0]

    def _greedy(self, outputs: np.ndarray) -> np.ndarray:
        actions: np.ndarray = np.tanh(outputs[:, :self.spaces.n_actions])
        return actions


class SACBrain(ActorCriticBrain):
    """Learns a squashed Gaussian actor, twin critics and the entropy temperature ``alpha`` from
    replayed transitions (Haarnoja et al., 2018), with the schedule, replay, state and weights of
    :class:`~mosaic.agents.learners.actor_critic_brain.ActorCriticBrain`.

    Each update, in this order: with ``learn_alpha``, ``log alpha`` takes an Adam step on
    ``-log alpha * mean(log pi(a|s) + target_entropy)`` (``alpha`` starts at ``initial_alpha``;
    ``target_entropy`` defaults to minus the number of action values); the critics regress on
    ``r + discount * (not terminated) * (min(Q1', Q2')(s', a') - alpha * log pi(a'|s'))``; the
    actor descends ``mean(alpha * log pi(a|s) - min(Q1, Q2)(s, a))`` by the reparameterised
    gradient; the target critics move towards the critics by ``tau``. Actions are drawn from
    ``context.rng``. The networks are ``tanh`` MLPs of ``hidden_sizes`` (the actor gives a mean
    and a log std per action value), with Adam at ``learning_rate``.

    Metrics, every ``sync_every`` updates, as means: ``critic_loss``, ``actor_loss``,
    ``q_mean`` (Q1 of the sampled transitions), ``alpha`` and ``entropy`` (``-log pi`` of the
    actor's samples).
    """

    params_name = "SACParams"
    params: SACParams
    metric_names = ("critic_loss", "actor_loss", "q_mean", "alpha", "entropy")

    def _build_actor(self) -> MLP:
        p = self.params
        d = self.spaces.n_actions
        actor = MLP([self.spaces.n_inputs, *p.hidden_sizes, 2 * d], self.rng,
                    output_gain=_ACTOR_OUTPUT_GAIN)
        self.actor_optimizer = Adam(actor.parameters(), p.learning_rate)
        self.log_alpha = np.array([np.log(p.initial_alpha)])
        self.alpha_optimizer = Adam([self.log_alpha], p.learning_rate)
        self.target_entropy = (-float(d) if p.target_entropy is None
                               else float(p.target_entropy))
        return actor

    def _train(self, batch: Transitions) -> dict[str, float]:
        p = self.params
        x, n, d = batch.observations, batch.observations.shape[0], self.spaces.n_actions
        outputs, cache = self.actor.forward_cached(x)
        noise = self.rng.standard_normal((n, d))
        _, log_prob = squashed_gaussian(outputs, noise)
        alpha = float(np.exp(self.log_alpha[0]))
        if p.learn_alpha:
            self.alpha_optimizer.step([np.array([-np.mean(log_prob + self.target_entropy)])])

        next_outputs = self.actor.forward(batch.next_observations)
        next_a, next_log_prob = squashed_gaussian(next_outputs,
                                                  self.rng.standard_normal((n, d)))
        next_value = self._target_value(batch.next_observations, next_a) - alpha * next_log_prob
        targets = batch.rewards + p.discount * np.where(batch.terminated, 0.0, next_value)
        critic_loss, q_mean = self._critic_step(batch, targets)

        actor_loss, grad_outputs = self._actor_gradient(x, outputs, noise, alpha)
        self.actor_optimizer.step(self.actor.backward(cache, grad_outputs))
        self._polyak(self.critic_targets, self.critics, p.tau)
        return {"critic_loss": critic_loss, "q_mean": q_mean, "actor_loss": actor_loss,
                "alpha": alpha, "entropy": -float(np.mean(log_prob))}

    def _actor_gradient(self, x: np.ndarray, outputs: np.ndarray, noise: np.ndarray,
                        alpha: float) -> tuple[float, np.ndarray]:
        """The actor's loss ``mean(alpha * log pi(a|s) - min(Q1, Q2)(s, a))`` for its
        ``outputs`` at ``x`` and the draws ``noise``, and its gradient with respect to
        ``outputs`` (reparameterised: ``a = tanh(mean + std * noise)``)."""
        n, d = noise.shape
        actions, log_prob = squashed_gaussian(outputs, noise)
        q, dq = self._action_gradient(x, actions, both=True)
        squash = 1.0 - actions**2
        # d/du of -log(1 - tanh(u)**2 + eps), u the pre-tanh sample.
        dlogp_du = 2.0 * actions * squash / (squash + _EPS)
        grad_u = (alpha * dlogp_du - dq * squash) / n
        raw_log_std = outputs[:, d:]
        std = np.exp(np.clip(raw_log_std, LOG_STD_MIN, LOG_STD_MAX))
        inside = (raw_log_std > LOG_STD_MIN) & (raw_log_std < LOG_STD_MAX)
        grad_log_std = (grad_u * std * noise - alpha / n) * inside
        return (float(np.mean(alpha * log_prob - q)),
                np.concatenate([grad_u, grad_log_std], axis=1))

    def _extra_state(self) -> dict[str, np.ndarray]:
        return {"log_alpha": self.log_alpha.copy(), **self.actor_optimizer.state("actor_adam."),
                **self.alpha_optimizer.state("alpha_adam.")}

    def _load_extra(self, state: Mapping[str, np.ndarray]) -> None:
        log_alpha = np.asarray(state["log_alpha"], dtype=np.float64)
        if log_alpha.shape != (1,):
            raise ValueError(f"log_alpha of shape {log_alpha.shape}; expected (1,)")
        self.actor_optimizer.load_state(state, "actor_adam.")
        self.alpha_optimizer.load_state(state, "alpha_adam.")
        self.log_alpha[...] = log_alpha
