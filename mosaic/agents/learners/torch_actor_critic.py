"""TD3's and SAC's brains on PyTorch: :class:`TorchTD3Brain` and :class:`TorchSACBrain`, the
deep-learning path of the off-policy actor-critic learners (the ``torch`` extra).

Each learns what its NumPy brain (:class:`~mosaic.agents.learners.TD3Brain`,
:class:`~mosaic.agents.learners.SACBrain`) learns, with the same params, replay, schedule,
metrics, checkpoint and state format, but takes its gradients with ``torch.autograd`` and steps
``torch.optim.Adam``. Their muscles are the NumPy :class:`~mosaic.agents.learners.TD3Muscle` and
:class:`~mosaic.agents.learners.SACMuscle`: the brain answers with the actor as NumPy arrays, so
an environment's process never imports torch.

The torch tensors are views of the NumPy networks' arrays
(:class:`~mosaic.agents.learners.torch_view.TorchView`): an Adam step in torch is at once the
NumPy network's new weights, with no copy per update, and the Polyak targets, the weights
muscles get and the checkpoints are the NumPy brain's own.

Importing this module without PyTorch raises :class:`~mosaic.core.errors.MissingExtra`, which
names the extra to install (``pip install 'mosaic[torch]'``); nothing else in mosaic imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.context import BrainContext
from mosaic.agents.learners.actor_critic_brain import ActorCriticBrain
from mosaic.agents.learners.mlp import Adam
from mosaic.agents.learners.replay import Transitions
from mosaic.agents.learners.sac import (
    _EPS,
    _LOG_2PI,
    LOG_STD_MAX,
    LOG_STD_MIN,
    MEAN_BOUND,
    SDE_EPS,
    SACBrain,
)
from mosaic.agents.learners.td3 import TD3Brain
from mosaic.core.extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "torch_actor_critic (TD3 and SAC on PyTorch)", "torch")

# After the check above, so that a missing torch is reported as these learners' extra.
from mosaic.agents.learners.torch_view import TorchView

__all__ = ["TorchSACBrain", "TorchTD3Brain"]


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64))


def _step(optimizer: torch.optim.Adam, loss: torch.Tensor,
          params: Sequence[torch.Tensor]) -> None:
    """One Adam step of ``optimizer`` down the gradient of ``loss`` with respect to ``params``
    alone (the critics stay as they are when the actor's loss goes through them)."""
    grads = torch.autograd.grad(loss, list(params))
    for param, grad in zip(params, grads, strict=True):
        param.grad = grad
    optimizer.step()


class _TorchActorCritic(ActorCriticBrain):
    """What :class:`TorchTD3Brain` and :class:`TorchSACBrain` add to their NumPy brains: torch
    views of the networks, one torch Adam per NumPy Adam (same parameters, order and learning
    rate), the critics' step, and the Adam moments in the NumPy layout in :meth:`state`."""

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        # The networks are small: more threads only contend for the cores with the run's
        # other processes.
        torch.set_num_threads(1)
        self.torch_actor = TorchView(self.actor, trainable=True)
        self.torch_critics = tuple(TorchView(c, trainable=True) for c in self.critics)
        self.torch_critic_targets = tuple(TorchView(c) for c in self.critic_targets)
        # (NumPy Adam, its torch twin): the NumPy one only carries the moments to and from state.
        self._adams: list[tuple[Adam, torch.optim.Adam]] = []
        self.torch_critic_optimizer = self._torch_adam(self.critic_optimizer, [
            *self.torch_critics[0].parameters(), *self.torch_critics[1].parameters()])

    def _torch_adam(self, numpy_adam: Adam, params: list[torch.Tensor]) -> torch.optim.Adam:
        optimizer = torch.optim.Adam(params, lr=numpy_adam.learning_rate,
                                     betas=(numpy_adam.beta1, numpy_adam.beta2),
                                     eps=numpy_adam.eps)
        self._adams.append((numpy_adam, optimizer))
        return optimizer

    # -- critics --------------------------------------------------------------------------
    def _torch_target_value(self, next_x: torch.Tensor, next_a: torch.Tensor) -> torch.Tensor:
        """min(Q1', Q2') of the target critics (N,)."""
        inputs = torch.cat([next_x, next_a], dim=1)
        q1, q2 = (target(inputs)[:, 0] for target in self.torch_critic_targets)
        return torch.minimum(q1, q2)

    def _targets(self, batch: Transitions, next_value: torch.Tensor) -> torch.Tensor:
        """``r + discount * (not terminated) * next_value``."""
        done = torch.from_numpy(batch.terminated)
        discount = float(self.params.discount)
        return _tensor(batch.rewards) + discount * torch.where(
            done, torch.zeros_like(next_value), next_value)

    def _torch_critic_step(self, x: torch.Tensor, actions: torch.Tensor,
                           targets: torch.Tensor) -> tuple[float, float]:
        """One Adam step on both critics towards ``targets``; (loss, mean Q1 of the batch).
        The loss is the sum of the critics' halved mean squared errors."""
        inputs = torch.cat([x, actions], dim=1)
        q = [critic(inputs)[:, 0] for critic in self.torch_critics]
        loss = sum((0.5 * ((qi - targets) ** 2).mean() for qi in q), torch.zeros(()))
        _step(self.torch_critic_optimizer, loss, [p for c in self.torch_critics
                                                  for p in c.parameters()])
        return float(loss.detach()), float(q[0].detach().mean())

    # -- state ----------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """As the NumPy brain's: the Adam moments (``critic_adam.m0``, ...) and step counts in
        its layout, so either brain loads the other's checkpoint."""
        for numpy_adam, optimizer in self._adams:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            numpy_adam.t = 0
            for param, m, v in zip(params, numpy_adam.m, numpy_adam.v, strict=True):
                moments = optimizer.state.get(param)
                if not moments:
                    m[...], v[...] = 0.0, 0.0
                    continue
                m[...] = moments["exp_avg"].detach().numpy()
                v[...] = moments["exp_avg_sq"].detach().numpy()
                numpy_adam.t = int(moments["step"])
        return super().state()

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        super()._load(state)  # the networks (in place, so the torch views follow), the moments
        for numpy_adam, optimizer in self._adams:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            optimizer.state.clear()
            if not numpy_adam.t:
                continue
            for param, m, v in zip(params, numpy_adam.m, numpy_adam.v, strict=True):
                moments: dict[str, Any] = {"step": torch.tensor(float(numpy_adam.t)),
                                           "exp_avg": torch.from_numpy(m.copy()),
                                           "exp_avg_sq": torch.from_numpy(v.copy())}
                optimizer.state[param] = moments


class TorchTD3Brain(_TorchActorCritic, TD3Brain):
    """:class:`~mosaic.agents.learners.TD3Brain` with its update on PyTorch (float64, CPU).

    Use it with :class:`~mosaic.agents.learners.TD3Muscle` and the same params. The networks
    start as the NumPy brain's do (drawn from ``context.rng``), replay samples and the target
    policy's noise are drawn in the same order, and the losses are the same: the critics' halved
    mean squared errors against the smoothed target, and every ``policy_delay``-th update
    ``-mean(Q1(s, tanh(actor(s))))`` for the actor, followed by the Polyak targets.
    :meth:`state` has the NumPy brain's keys and shapes, so either brain loads the other's
    checkpoint.
    """

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        self.torch_actor_target = TorchView(self.actor_target)
        self.torch_actor_optimizer = self._torch_adam(self.actor_optimizer,
                                                      self.torch_actor.parameters())

    def _train(self, batch: Transitions) -> dict[str, float]:
        p = self.params
        noise = np.clip(self.rng.standard_normal(batch.actions.shape) * p.policy_noise,
                        -p.noise_clip, p.noise_clip)
        x, next_x = _tensor(batch.observations), _tensor(batch.next_observations)
        with torch.no_grad():
            next_a = (torch.tanh(self.torch_actor_target(next_x)) + _tensor(noise)).clamp(-1, 1)
            targets = self._targets(batch, self._torch_target_value(next_x, next_a))
        critic_loss, q_mean = self._torch_critic_step(x, _tensor(batch.actions), targets)
        metrics = {"critic_loss": critic_loss, "q_mean": q_mean}
        if self.updates % p.policy_delay == 0:
            actions = torch.tanh(self.torch_actor(x))
            actor_loss = -self.torch_critics[0](torch.cat([x, actions], dim=1))[:, 0].mean()
            _step(self.torch_actor_optimizer, actor_loss, self.torch_actor.parameters())
            metrics["actor_loss"] = float(actor_loss.detach())
            self._polyak((self.actor_target, *self.critic_targets),
                         (self.actor, *self.critics), p.tau)
        return metrics


def _squashed_gaussian(outputs: torch.Tensor,
                       noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`mosaic.agents.learners.sac.squashed_gaussian` in torch: actions (N, d) and their
    log-probabilities (N,)."""
    d = noise.shape[1]
    log_std = outputs[:, d:].clamp(LOG_STD_MIN, LOG_STD_MAX)
    actions = torch.tanh(outputs[:, :d] + log_std.exp() * noise)
    log_prob = ((-0.5 * noise**2 - log_std).sum(dim=1) - 0.5 * d * _LOG_2PI
                - torch.log(1.0 - actions**2 + _EPS).sum(dim=1))
    return actions, log_prob


def _squashed_gsde(means: torch.Tensor, features: torch.Tensor, log_std: torch.Tensor,
                   draws: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`mosaic.agents.learners.sac.squashed_gsde` in torch, for the exploration matrix
    ``exp(log_std) * draws`` (detach ``features`` to hold them constant): actions (N, d) and
    their log-probabilities (N,)."""
    d = means.shape[1]
    std = log_std.exp()
    noise = features @ (std * draws)
    variance = (features * features) @ (std * std) + SDE_EPS
    actions = torch.tanh(means.clamp(-MEAN_BOUND, MEAN_BOUND) + noise)
    log_prob = ((-0.5 * noise**2 / variance - 0.5 * variance.log()).sum(dim=1)
                - 0.5 * d * _LOG_2PI - torch.log(1.0 - actions**2 + _EPS).sum(dim=1))
    return actions, log_prob


class TorchSACBrain(_TorchActorCritic, SACBrain):
    """:class:`~mosaic.agents.learners.SACBrain` with its update on PyTorch (float64, CPU).

    Use it with :class:`~mosaic.agents.learners.SACMuscle` and the same params. The networks
    start as the NumPy brain's do, replay samples and the actor's draws come from
    ``context.rng`` in the same order, and each update takes the same steps in the same order:
    ``log alpha`` (with ``learn_alpha``), the critics against the soft target, the actor down
    ``mean(alpha * log pi(a|s) - min(Q1, Q2)(s, a))`` by the reparameterised gradient, then the
    Polyak targets. :meth:`state` has the NumPy brain's keys and shapes, so either brain loads
    the other's checkpoint. With ``exploration: gsde`` the actor's loss and log-probabilities
    are :func:`~mosaic.agents.learners.sac.squashed_gsde`'s, ``log_std`` takes the actor's Adam
    steps, and torch's gradient goes through the exploration matrix and the variance (and
    through the features only with ``sde_learn_features``), as the NumPy brain's does.
    """

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        self.torch_log_alpha = torch.from_numpy(self.log_alpha).requires_grad_(True)
        actor_params = self.torch_actor.parameters()
        if self.gsde:
            self.torch_log_std = torch.from_numpy(self.log_std).requires_grad_(True)
            actor_params = [*actor_params, self.torch_log_std]
        self.torch_actor_optimizer = self._torch_adam(self.actor_optimizer, actor_params)
        self.torch_alpha_optimizer = self._torch_adam(self.alpha_optimizer,
                                                      [self.torch_log_alpha])

    def _train(self, batch: Transitions) -> dict[str, float]:
        p = self.params
        n, d = batch.observations.shape[0], self.spaces.n_actions
        x, next_x = _tensor(batch.observations), _tensor(batch.next_observations)
        outputs, features = self.torch_actor.with_features(x)
        if self.gsde:
            draws = _tensor(self.rng.standard_normal(self.log_std.shape))
            _, log_prob = _squashed_gsde(outputs, features, self.torch_log_std, draws)
        else:
            draws = _tensor(self.rng.standard_normal((n, d)))
            _, log_prob = _squashed_gaussian(outputs, draws)
        alpha = float(np.exp(self.log_alpha[0]))
        if p.learn_alpha:
            alpha_loss = -(self.torch_log_alpha[0]
                           * (log_prob.detach() + self.target_entropy).mean())
            _step(self.torch_alpha_optimizer, alpha_loss, [self.torch_log_alpha])

        with torch.no_grad():
            if self.gsde:
                next_a, next_log_prob = _squashed_gsde(
                    *self.torch_actor.with_features(next_x), self.torch_log_std, draws)
            else:
                next_a, next_log_prob = _squashed_gaussian(
                    self.torch_actor(next_x), _tensor(self.rng.standard_normal((n, d))))
            targets = self._targets(batch, self._torch_target_value(next_x, next_a)
                                    - alpha * next_log_prob)
        critic_loss, q_mean = self._torch_critic_step(x, _tensor(batch.actions), targets)

        if self.gsde:
            actions, actor_log_prob = _squashed_gsde(
                outputs, features if p.sde_learn_features else features.detach(),
                self.torch_log_std, draws)
            trained = [*self.torch_actor.parameters(), self.torch_log_std]
        else:
            actions, actor_log_prob = _squashed_gaussian(outputs, draws)
            trained = self.torch_actor.parameters()
        inputs = torch.cat([x, actions], dim=1)
        q = torch.minimum(*(critic(inputs)[:, 0] for critic in self.torch_critics))
        actor_loss = (alpha * actor_log_prob - q).mean()
        _step(self.torch_actor_optimizer, actor_loss, trained)
        self._polyak(self.critic_targets, self.critics, p.tau)
        return {"critic_loss": critic_loss, "q_mean": q_mean,
                "actor_loss": float(actor_loss.detach()), "alpha": alpha,
                "entropy": -float(log_prob.detach().mean())}
