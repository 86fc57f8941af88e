"""The policy heads of :mod:`mosaic.agents.learners.ppo` and its advantage estimate.

A head turns the policy network's outputs into actions and log-probabilities: a softmax over
Discrete actions (honouring action masks), or a diagonal Gaussian over Box actions with a
learned log standard deviation. The muscle samples with it; the brain takes the gradient of the
clipped surrogate objective through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mosaic.agents.learners.mlp import (
    MLP,
    Adam,
    log_softmax,
    masked_logits,
    sample_softmax,
    softmax_policy_loss_from_log_probs,
)

if TYPE_CHECKING:
    from mosaic.agents.learners.ppo_params import PPOParams

__all__ = ["LossGradients", "Minibatch", "PolicyHead", "SurrogateStats", "annealed_fraction",
           "clipped_surrogate", "gae", "loss_gradients", "policy_update", "ppo_step"]

_LOG_2PI = math.log(2.0 * math.pi)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    last_value: float,
    discount: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and value targets of one trajectory segment.

    ``rewards`` and ``values`` (T,) are per step; ``last_value`` is the value of the observation
    after the last step (0 where the episode terminated). ``delta_t = r_t + discount *
    V_{t+1} - V_t`` and ``A_t = delta_t + discount * gae_lambda * A_{t+1}``. Returns
    ``(advantages, advantages + values)``.
    """
    next_values = np.append(values[1:], last_value)
    deltas = rewards + discount * next_values - values
    advantages = np.empty_like(deltas)
    running = 0.0
    decay = discount * gae_lambda
    for t in range(deltas.shape[0] - 1, -1, -1):
        running = deltas[t] + decay * running
        advantages[t] = running
    return advantages, advantages + values


def annealed_fraction(anneal_steps: int, steps: int) -> float:
    """What is left of the learning rate and clip range after ``steps`` env steps learnt from
    (this update's rollout included), when they fall linearly to 0 over ``anneal_steps``:
    ``max(0, 1 - steps / anneal_steps)``, as Stable-Baselines3 computes the RL Zoo's ``lin_``
    schedules before each update; 1 when ``anneal_steps`` is 0 (no annealing)."""
    if not anneal_steps:
        return 1.0
    return max(0.0, 1.0 - steps / anneal_steps)


@dataclass(frozen=True)
class PolicyHead:
    """Actions from policy outputs: ``discrete`` (softmax over ``size`` actions) or a Gaussian
    over ``size`` action dimensions, with ``log_std`` (size,) given per call."""

    discrete: bool
    size: int

    def sample(
        self,
        outputs: np.ndarray,
        rng: np.random.Generator,
        masks: np.ndarray | None = None,
        log_std: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Actions (N,) int64 or (N, size) float64 drawn for outputs (N, size), and their
        log-probabilities (N,).

        Discrete heads draw one uniform per row from ``rng``, Gaussian heads ``size`` standard
        normals per row. Masked actions are never drawn.
        """
        n = outputs.shape[0]
        if self.discrete:
            logits = masked_logits(outputs, masks)
            actions = sample_softmax(logits, np.asarray(rng.random(n)))
            return actions, log_softmax(logits)[np.arange(n), actions]
        std_log = self._log_std(log_std)
        noise = rng.standard_normal((n, self.size))
        actions = outputs + np.exp(std_log) * noise
        logp = np.sum(-0.5 * noise * noise - std_log - 0.5 * _LOG_2PI, axis=1)
        return actions, logp

    def greedy(self, outputs: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """The most likely action per row: the arg-max legal logit (ties to the lowest), or the
        Gaussian's mean."""
        if self.discrete:
            best: np.ndarray = np.argmax(masked_logits(outputs, masks), axis=1).astype(np.int64)
            return best
        return outputs

    def _log_std(self, log_std: np.ndarray | None) -> np.ndarray:
        return np.zeros(self.size) if log_std is None else log_std


@dataclass(frozen=True)
class SurrogateStats:
    """What one minibatch of the clipped surrogate gave."""

    loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float


def clipped_surrogate(
    head: PolicyHead,
    outputs: np.ndarray,
    actions: np.ndarray,
    old_log_probs: np.ndarray,
    advantages: np.ndarray,
    clip_range: float,
    entropy_coef: float,
    masks: np.ndarray | None = None,
    log_std: np.ndarray | None = None,
) -> tuple[SurrogateStats, np.ndarray, np.ndarray | None]:
    """PPO's clipped surrogate loss minus the entropy bonus, over a minibatch of N rows.

    ``loss = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A)) - entropy_coef * mean(entropy)``
    with ``r = pi(a) / pi_old(a)``. Returns the stats, the gradient with respect to
    ``outputs`` (N, size), and for a Gaussian head the gradient with respect to ``log_std``
    (``None`` for a discrete one). ``approx_kl`` is ``mean((r - 1) - log r)``.
    """
    n = outputs.shape[0]
    rows = np.arange(n)
    if head.discrete:
        all_log_probs = log_softmax(masked_logits(outputs, masks))
        log_probs = all_log_probs[rows, actions]
    else:
        std_log = head._log_std(log_std)
        z = (actions - outputs) / np.exp(std_log)
        log_probs = np.sum(-0.5 * z * z - std_log - 0.5 * _LOG_2PI, axis=1)
    log_ratio = log_probs - old_log_probs
    ratio = np.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = np.clip(ratio, 1.0 - clip_range, 1.0 + clip_range) * advantages
    # Where the clipped term is the smaller one, the objective is flat in the policy.
    weights = np.where(unclipped <= clipped, unclipped, 0.0)
    loss = -float(np.minimum(unclipped, clipped).mean())
    stats = dict(approx_kl=float((ratio - 1.0 - log_ratio).mean()),
                 clip_fraction=float((np.abs(ratio - 1.0) > clip_range).mean()))
    if head.discrete:
        # d/dlogits of -mean(w log pi(a)) is the surrogate's gradient when w = r A is held.
        _, grad, entropy = softmax_policy_loss_from_log_probs(all_log_probs, actions,
                                                              weights, entropy_coef)
        return SurrogateStats(loss - entropy_coef * entropy, entropy, **stats), grad, None
    entropy = float(np.sum(std_log) + 0.5 * head.size * (1.0 + _LOG_2PI))
    std = np.exp(std_log)
    grad_mean = -weights[:, None] * z / std / n
    grad_log_std = -np.sum(weights[:, None] * (z * z - 1.0), axis=0) / n - entropy_coef
    return (SurrogateStats(loss - entropy_coef * entropy, entropy, **stats), grad_mean,
            grad_log_std)


@dataclass(frozen=True, slots=True)
class Minibatch:
    """The rows of one PPO minibatch: the policy's inputs, the critic's (the same array for
    PPO, the global state for MAPPO's centralised critic), the actions taken, their
    log-probabilities then, the action masks (None: none), the advantages and the value
    targets."""

    observations: np.ndarray
    critic_inputs: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    masks: np.ndarray | None
    advantages: np.ndarray
    returns: np.ndarray


def _normalized(values: np.ndarray) -> np.ndarray:
    """``(values - values.mean()) / (values.std() + 1e-8)`` for a 1-d array, to the last bit,
    with the centred values computed once (``std`` would compute them again)."""
    centred: np.ndarray = values - values.sum() / values.shape[0]
    squares = centred * centred
    std = np.sqrt(squares.sum() / values.shape[0])
    centred /= std + 1e-8
    return centred


@dataclass(frozen=True, slots=True)
class LossGradients:
    """PPO's loss on a minibatch and its gradient with respect to what the networks output:
    the policy's outputs (N, size), the log std of a Gaussian head (None for a discrete one)
    and the value network's outputs (N, 1). Backpropagating these through the networks gives
    the loss's gradient with respect to their weights, whichever library does it."""

    surrogate: SurrogateStats
    value_loss: float
    policy_outputs: np.ndarray
    log_std: np.ndarray | None
    values: np.ndarray

    def add_stats(self, totals: dict[str, float], grad_norm: float) -> None:
        """Add the minibatch's stats to ``totals`` (``policy_loss``, ``value_loss``,
        ``entropy``, ``approx_kl``, ``clip_fraction``, and ``grad_norm``, the norm of the
        weights' gradient before clipping)."""
        stats = self.surrogate
        for name, number in (("policy_loss", stats.loss), ("value_loss", self.value_loss),
                             ("entropy", stats.entropy), ("approx_kl", stats.approx_kl),
                             ("clip_fraction", stats.clip_fraction), ("grad_norm", grad_norm)):
            totals[name] += number


def loss_gradients(head: PolicyHead, log_std: np.ndarray, params: PPOParams, batch: Minibatch,
                   outputs: np.ndarray, values: np.ndarray,
                   clip_range: float | None = None) -> LossGradients:
    """PPO's loss on ``batch`` given the policy's ``outputs`` and the value network's
    ``values`` for it: the clipped surrogate through ``head`` (with ``log_std`` for a Gaussian
    head) on the advantages (normalised per minibatch if the params say so) plus
    ``value_coef`` times the squared error of ``values`` against the targets. ``clip_range``
    replaces ``params.clip_range`` (an annealed one)."""
    rows = batch.advantages.shape[0]
    advantages = batch.advantages
    if params.normalize_advantages and rows > 1:
        advantages = _normalized(advantages)
    surrogate, grad_out, grad_log_std = clipped_surrogate(
        head, outputs, batch.actions, batch.log_probs, advantages,
        params.clip_range if clip_range is None else clip_range, params.entropy_coef,
        batch.masks, log_std)
    error = values[:, 0] - batch.returns
    return LossGradients(surrogate, float((error * error).mean()), grad_out, grad_log_std,
                         (params.value_coef * 2.0 / rows) * error[:, None])


def ppo_step(policy: MLP, value: MLP, optimizer: Adam, head: PolicyHead,
             log_std: np.ndarray, params: PPOParams, batch: Minibatch,
             totals: dict[str, float], clip_range: float | None = None) -> None:
    """One Adam step of PPO on ``batch`` (the loss of :func:`loss_gradients`, backpropagated
    through ``policy`` and ``value``); adds the minibatch's stats to ``totals`` (see
    :meth:`LossGradients.add_stats`). ``clip_range`` replaces ``params.clip_range`` (an
    annealed one); the optimizer's learning rate is its own."""
    outputs, policy_inputs = policy.forward_cached(batch.observations)
    values, value_inputs = value.forward_cached(batch.critic_inputs)
    gradients = loss_gradients(head, log_std, params, batch, outputs, values, clip_range)
    grads = [*policy.backward(policy_inputs, gradients.policy_outputs),
             *([] if gradients.log_std is None else [gradients.log_std]),
             *value.backward(value_inputs, gradients.values)]
    grad_norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
    optimizer.step(grads, grad_norm)
    gradients.add_stats(totals, grad_norm)


def policy_update(policy: MLP, head: PolicyHead, log_std: np.ndarray,
                  version: int) -> dict[str, np.ndarray]:
    """The policy as an update for a muscle: ``W0``, ``b0``, ..., ``log_std`` (Box actions)
    and ``version`` (0-d)."""
    arrays = policy.to_arrays()
    if not head.discrete:
        arrays["log_std"] = log_std.copy()
    arrays["version"] = np.array(version, dtype=np.int64)
    return arrays
