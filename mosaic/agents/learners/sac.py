"""SAC (soft actor-critic) for Box observations and bounded Box actions (Pendulum,
MountainCarContinuous, ...), on the NumPy :class:`~mosaic.agents.learners.MLP`.

The muscle samples from the squashed Gaussian actor and sends its transitions; the brain replays
them, trains twin critics against Polyak targets, the actor against the smaller critic with an
entropy bonus, and the entropy temperature towards a target entropy, and answers with the
actor's weights. Params: :class:`~mosaic.agents.learners.actor_critic_params.SACParams`.

With ``exploration: gsde`` (generalised state-dependent exploration, Raffin et al., 2021, as
Stable-Baselines3's ``use_sde``) the actor gives only the means ``m(s)`` and the noise is
``z(s) @ W``: ``z(s)`` the actor's last hidden layer (h features), ``W`` an exploration matrix
(h, action values) of entries ``N(0, exp(log_std)**2)``, ``log_std`` (h, action values) learnt
beside the actor. The muscle keeps one ``W`` for a whole episode (or ``sde_sample_freq``
steps), so its noise changes only as the state does: one push is kept up for as long as the
car needs it to rock up MountainCar's hill, where per-step noise averages out. Given ``z(s)``
the pre-squash action is Gaussian of mean ``clip(m(s), ±MEAN_BOUND)`` and variance
``z(s)**2 @ exp(log_std)**2`` per action value: :func:`squashed_gsde`. With
``sde_learn_features`` (the default, as Stable-Baselines3's SAC) the actor's gradient reaches
its hidden layers through the features' part in the noise and the variance as well as through
the means; without, the features count as constants there (Stable-Baselines3's
``learn_features=False``, its distribution's default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.context import MuscleContext
from mosaic.agents.learners.actor_critic import ActorCriticMuscle
from mosaic.agents.learners.actor_critic_brain import ActorCriticBrain
from mosaic.agents.learners.mlp import MLP, Adam
from mosaic.agents.learners.replay import Transitions
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from mosaic.agents.learners.actor_critic_params import SACParams

__all__ = ["MEAN_BOUND", "SDE_EPS", "SACBrain", "SACMuscle", "squashed_gaussian",
           "squashed_gsde"]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
#: With gSDE, the means are clipped to [-MEAN_BOUND, MEAN_BOUND] before the noise and the
#: tanh (Stable-Baselines3's ``clip_mean``), so that they cannot run off where tanh is flat.
MEAN_BOUND = 2.0
#: Added to the gSDE variance, so that a state whose features are all 0 has a density.
SDE_EPS = 1e-6
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


def squashed_gsde(means: np.ndarray, features: np.ndarray, log_std: np.ndarray,
                  weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """gSDE's actions ``tanh(clip(means, ±MEAN_BOUND) + features @ weights)`` (N, d) and their
    log-probabilities (N,): ``means`` (N, d) and ``features`` (N, h) are the actor's outputs and
    last hidden layer, ``weights`` (h, d) an exploration matrix, ``exp(log_std)`` (h, d) times
    standard normals. Given the features, the noise ``features @ weights`` is Gaussian of
    variance ``features**2 @ exp(log_std)**2 + SDE_EPS`` per action value; the log-probability
    is that Gaussian's, less the tanh's change of volume."""
    d = means.shape[1]
    noise = features @ weights
    variance = (features * features) @ np.exp(2.0 * log_std) + SDE_EPS
    actions = np.tanh(np.clip(means, -MEAN_BOUND, MEAN_BOUND) + noise)
    log_prob = (np.sum(-0.5 * noise**2 / variance - 0.5 * np.log(variance), axis=1)
                - 0.5 * d * _LOG_2PI - np.sum(np.log(1.0 - actions**2 + _EPS), axis=1))
    return actions, log_prob


class SACMuscle(ActorCriticMuscle):
    """Samples from the squashed Gaussian actor (:func:`squashed_gaussian`), scaled to the action
    space's bounds; in test mode it acts with ``tanh(mean)``. Spaces, experience, updates: as
    :class:`~mosaic.agents.learners.actor_critic.ActorCriticMuscle` (a Discrete action space is
    refused at setup). Before the brain's first weights it samples ``tanh(N(0, 1))``.

    With ``exploration: gsde`` it acts with ``tanh(clip(mean, ±MEAN_BOUND) + z @ W)``
    (:func:`squashed_gsde`): ``z`` the actor's last hidden layer, ``W`` the exploration matrix
    of the slot and copy, drawn as ``exp(log_std) * N(0, 1)`` (``log_std`` as the brain last
    sent it; ``log_std_init`` before) at its first exploring step of each episode and, with
    ``sde_sample_freq`` N >= 1, again after every N exploring steps; in test mode with
    ``tanh(clip(mean, ±MEAN_BOUND))``. Before the brain's first weights it acts with 0. The
    matrices and their ages are part of :meth:`state`, and the updates carry ``log_std``.

    Promises: one standard normal per action value and step from ``context.rng`` (uniforms during
    ``random_steps``); with ``gsde`` none per step but ``h * d`` (the last hidden layer's size
    times the action values) per new matrix, the copies whose matrix is due in copy order.
    """

    params_name = "SACParams"
    params: SACParams
    outputs_per_action = 2

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        p = self.params
        self.gsde = p.exploration == "gsde"
        if self.gsde:
            d, h = self.spaces.n_actions, p.hidden_sizes[-1]
            self.n_outputs = d  # the means; the noise's scale is log_std, sent beside them
            self._rows = {slot: i for i, slot in enumerate(sorted(context.slots))}
            self._log_std = np.full((h, d), p.log_std_init)
            # Per slot (sorted) and copy: the exploration matrix, and the exploring steps it
            # has served (-1: a new one is due before the next).
            self._sde_weights = np.zeros((len(self._rows), context.copies, h, d))
            self._sde_age = np.full((len(self._rows), context.copies), -1, dtype=np.int64)

    def _forward(self, x: np.ndarray) -> np.ndarray:
        if not self.gsde:
            return super()._forward(x)
        # gSDE needs the last hidden layer too: the means, then the features.
        if self.actor is None:
            return np.zeros((x.shape[0], self.n_outputs + self._log_std.shape[0]))
        means, layers = self.actor.forward_cached(x)
        return np.concatenate([means, layers[-1]], axis=1)

    def _explore(self, outputs: np.ndarray, slot: str) -> np.ndarray:
        d = self.spaces.n_actions
        if not self.gsde:
            noise = self.rng.standard_normal((outputs.shape[0], d))
            return squashed_gaussian(outputs, noise)[0]
        copies = outputs.shape[0]
        row = self._rows[slot]
        age = self._sde_age[row, :copies]  # views: what changes here is the muscle's
        weights = self._sde_weights[row, :copies]
        due = age < 0
        if self.params.sde_sample_freq > 0:
            due |= age >= self.params.sde_sample_freq
        if due.any():
            draws = self.rng.standard_normal((int(due.sum()), *self._log_std.shape))
            weights[due] = np.exp(self._log_std) * draws
            age[due] = 0
        age += 1
        noise = np.matmul(outputs[:, None, d:], weights)[:, 0, :]
        actions: np.ndarray = np.tanh(np.clip(outputs[:, :d], -MEAN_BOUND, MEAN_BOUND) + noise)
        return actions

    def _greedy(self, outputs: np.ndarray) -> np.ndarray:
        means = outputs[:, :self.spaces.n_actions]
        if self.gsde:
            means = np.clip(means, -MEAN_BOUND, MEAN_BOUND)
        actions: np.ndarray = np.tanh(means)
        return actions

    def reset(self) -> None:
        """Start an episode: forget pending actions; with gSDE new exploration matrices are
        due."""
        super().reset()
        if self.gsde:
            self._sde_age[...] = -1

    def _copies_begin(self, slot: str, starts: np.ndarray) -> None:
        if self.gsde:
            self._sde_age[self._rows[slot], np.asarray(starts, dtype=bool)] = -1

    def apply_update(self, update: Any) -> None:
        """Act with the actor in ``update`` and, with gSDE, its ``log_std`` (``MosaicError``
        if either does not fit)."""
        super().apply_update(update)
        if self.gsde:
            log_std = update.get("log_std") if isinstance(update, Mapping) else None
            if log_std is None or np.shape(log_std) != self._log_std.shape:
                raise MosaicError(
                    f"{type(self).__name__} with exploration: gsde needs the update's log_std "
                    f"of shape {self._log_std.shape} (last hidden layer, action values); got "
                    f"{'none' if log_std is None else np.shape(log_std)} (is the brain's "
                    f"exploration gsde too?)")
            self._log_std = np.array(log_std, dtype=np.float64)

    def state(self) -> dict[str, np.ndarray]:
        """``steps`` (see :class:`ActorCriticMuscle`) and, with gSDE, ``sde_weights`` and
        ``sde_age``: the exploration matrices (slots in sorted order, copies, features, action
        values) and the exploring steps each has served (-1: due)."""
        state = super().state()
        if self.gsde:
            state["sde_weights"] = self._sde_weights.copy()
            state["sde_age"] = self._sde_age.copy()
        return state

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue from ``state``; without ``sde_weights`` (saved with Gaussian exploration)
        new matrices are due."""
        super().load_state(state)
        if not self.gsde or "sde_weights" not in state:
            return
        weights = np.asarray(state["sde_weights"], dtype=np.float64)
        age = np.asarray(state.get("sde_age", np.zeros(0)), dtype=np.int64)
        if weights.shape != self._sde_weights.shape or age.shape != self._sde_age.shape:
            raise MosaicError(f"{type(self).__name__} state 'sde_weights' and 'sde_age' of "
                              f"shapes {weights.shape} and {age.shape}; expected "
                              f"{self._sde_weights.shape} and {self._sde_age.shape}")
        self._sde_weights[...] = weights
        self._sde_age[...] = age


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

    With ``exploration: gsde`` the actor gives the means only, and ``log_std`` (last hidden
    layer's size, action values; ``log_std_init`` to start with) takes the actor's Adam steps
    beside its weights; log-probabilities are :func:`squashed_gsde`'s. Each update draws one
    exploration matrix (``h * d`` standard normals) for the whole batch, for the actions at
    ``s`` and at ``s'`` alike (as Stable-Baselines3 does), and the actor's gradient reaches
    ``log_std`` through the matrix and the variance, and the hidden layers through the
    features' part in them too with ``sde_learn_features``. ``log_std`` is part of the weights
    muscles get and of :meth:`state`.

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
        self.gsde = p.exploration == "gsde"
        actor = MLP([self.spaces.n_inputs, *p.hidden_sizes, d if self.gsde else 2 * d],
                    self.rng, output_gain=_ACTOR_OUTPUT_GAIN)
        trained = actor.parameters()
        if self.gsde:
            self.log_std = np.full((p.hidden_sizes[-1], d), p.log_std_init)
            trained = [*trained, self.log_std]
        self.actor_optimizer = Adam(trained, p.learning_rate)
        self.log_alpha = np.array([np.log(p.initial_alpha)])
        self.alpha_optimizer = Adam([self.log_alpha], p.learning_rate)
        self.target_entropy = (-float(d) if p.target_entropy is None
                               else float(p.target_entropy))
        return actor

    def _train(self, batch: Transitions) -> dict[str, float]:
        p = self.params
        x, n, d = batch.observations, batch.observations.shape[0], self.spaces.n_actions
        outputs, cache = self.actor.forward_cached(x)
        if self.gsde:
            draws = self.rng.standard_normal(self.log_std.shape)
            weights = np.exp(self.log_std) * draws
            _, log_prob = squashed_gsde(outputs, cache[-1], self.log_std, weights)
        else:
            draws = self.rng.standard_normal((n, d))
            _, log_prob = squashed_gaussian(outputs, draws)
        alpha = float(np.exp(self.log_alpha[0]))
        if p.learn_alpha:
            self.alpha_optimizer.step([np.array([-np.mean(log_prob + self.target_entropy)])])

        if self.gsde:
            next_outputs, next_cache = self.actor.forward_cached(batch.next_observations)
            next_a, next_log_prob = squashed_gsde(next_outputs, next_cache[-1], self.log_std,
                                                  weights)
        else:
            next_outputs = self.actor.forward(batch.next_observations)
            next_a, next_log_prob = squashed_gaussian(next_outputs,
                                                      self.rng.standard_normal((n, d)))
        next_value = self._target_value(batch.next_observations, next_a) - alpha * next_log_prob
        targets = batch.rewards + p.discount * np.where(batch.terminated, 0.0, next_value)
        critic_loss, q_mean = self._critic_step(batch, targets)

        if self.gsde:
            actor_loss, grad_outputs, grad_log_std, grad_features = self._gsde_actor_gradient(
                x, outputs, cache[-1], draws, alpha)
            grads = self.actor.backward(cache, grad_outputs, grad_features
                                        if p.sde_learn_features else None)
            self.actor_optimizer.step([*grads, grad_log_std])
        else:
            actor_loss, grad_outputs = self._actor_gradient(x, outputs, draws, alpha)
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

    def _gsde_actor_gradient(self, x: np.ndarray, means: np.ndarray, features: np.ndarray,
                             draws: np.ndarray, alpha: float
                             ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """The actor's loss ``mean(alpha * log pi(a|s) - min(Q1, Q2)(s, a))`` under gSDE for
        its ``means`` and ``features`` (last hidden layer) at ``x`` and the exploration matrix
        ``exp(log_std) * draws``, and its gradients with respect to ``means``, ``log_std`` and
        ``features`` (reparameterised: ``a = tanh(clip(means) + features @ (exp(log_std) *
        draws))``)."""
        n = means.shape[0]
        std = np.exp(self.log_std)
        noise = features @ (std * draws)
        variance = (features * features) @ (std * std) + SDE_EPS
        actions, log_prob = squashed_gsde(means, features, self.log_std, std * draws)
        q, dq = self._action_gradient(x, actions, both=True)
        squash = 1.0 - actions**2
        # d/du of -log(1 - tanh(u)**2 + eps), u the pre-tanh sample.
        dlogp_du = 2.0 * actions * squash / (squash + _EPS)
        grad_u = (alpha * dlogp_du - dq * squash) / n
        inside = np.abs(means) < MEAN_BOUND
        # The Gaussian term -noise**2 / (2 variance) - log(variance) / 2 of log pi, through
        # the noise and through the variance; both are functions of std.
        grad_noise = grad_u - alpha / n * noise / variance
        grad_variance = alpha / n * 0.5 * (noise**2 / variance**2 - 1.0 / variance)
        weights = std * draws
        grad_std = ((features.T @ grad_noise) * draws
                    + 2.0 * std * ((features * features).T @ grad_variance))
        grad_features = grad_noise @ weights.T + 2.0 * features * (grad_variance @ (std * std).T)
        return (float(np.mean(alpha * log_prob - q)), grad_u * inside, grad_std * std,
                grad_features)

    def _publishable(self) -> dict[str, np.ndarray]:
        arrays = super()._publishable()
        if self.gsde:
            arrays["log_std"] = self.log_std.copy()
        return arrays

    def _extra_state(self) -> dict[str, np.ndarray]:
        extra = {"log_alpha": self.log_alpha.copy(), **self.actor_optimizer.state("actor_adam."),
                 **self.alpha_optimizer.state("alpha_adam.")}
        if self.gsde:
            extra["log_std"] = self.log_std.copy()
        return extra

    def _load_extra(self, state: Mapping[str, np.ndarray]) -> None:
        log_alpha = np.asarray(state["log_alpha"], dtype=np.float64)
        if log_alpha.shape != (1,):
            raise ValueError(f"log_alpha of shape {log_alpha.shape}; expected (1,)")
        if self.gsde:
            log_std, published = (np.asarray(state[name], dtype=np.float64)
                                  for name in ("log_std", "published.log_std"))
            for name, array in (("log_std", log_std), ("published.log_std", published)):
                if array.shape != self.log_std.shape:
                    raise ValueError(f"{name} of shape {array.shape}; expected "
                                     f"{self.log_std.shape}")
        self.actor_optimizer.load_state(state, "actor_adam.")
        self.alpha_optimizer.load_state(state, "alpha_adam.")
        self.log_alpha[...] = log_alpha
        if self.gsde:
            self.log_std[...] = log_std
            self._published["log_std"] = published.copy()
