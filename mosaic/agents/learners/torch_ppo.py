"""PPO's brain on PyTorch: :class:`TorchPPOBrain`, the deep-learning path (the ``torch`` extra).

It learns what :class:`~mosaic.agents.learners.PPOBrain` learns, with the same params, rollout,
metrics, checkpoint and state format, but takes its gradients with ``torch.autograd`` and steps
``torch.optim.Adam``. Its muscle is the NumPy :class:`~mosaic.agents.learners.PPOMuscle`: the
brain answers with the policy as NumPy arrays, so an environment's process never imports torch.

Importing this module without PyTorch raises :class:`~mosaic.core.errors.MissingExtra`, which
names the extra to install (``pip install 'mosaic[torch]'``); nothing else in mosaic imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.context import BrainContext
from mosaic.agents.learners.mlp import MLP
from mosaic.agents.learners.ppo_brain import PPOBrain, _Rollout
from mosaic.core.extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "TorchPPOBrain (PPO on PyTorch)", "torch")

__all__ = ["TorchPPOBrain", "torch_mlp"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def torch_mlp(network: MLP) -> torch.nn.Sequential:
    """``network`` as a float64 ``torch.nn.Sequential`` of ``Linear`` and ``Tanh`` layers that
    computes the same function (``Linear.weight`` is ``W.T``)."""
    modules: list[torch.nn.Module] = []
    for i, (w, _) in enumerate(network.layers):
        modules.append(torch.nn.Linear(w.shape[0], w.shape[1], dtype=torch.float64))
        if i < len(network.layers) - 1:
            modules.append(torch.nn.Tanh())
    module = torch.nn.Sequential(*modules)
    _to_torch(network, module)
    return module


def _to_torch(network: MLP, module: torch.nn.Sequential) -> None:
    """Copy ``network``'s weights into ``module`` in place (the layout :func:`torch_mlp` made)."""
    linears = [m for m in module if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for linear, (w, b) in zip(linears, network.layers, strict=True):
            linear.weight.copy_(torch.from_numpy(w.T.copy()))
            linear.bias.copy_(torch.from_numpy(b.copy()))


def _to_numpy(module: torch.nn.Sequential, network: MLP) -> None:
    """Copy ``module``'s weights into ``network`` in place (the layout :func:`torch_mlp` made)."""
    linears = [m for m in module if isinstance(m, torch.nn.Linear)]
    for linear, (w, b) in zip(linears, network.layers, strict=True):
        w[...] = linear.weight.detach().numpy().T
        b[...] = linear.bias.detach().numpy()


class TorchPPOBrain(PPOBrain):
    """:class:`~mosaic.agents.learners.PPOBrain` with its update on PyTorch (float64, CPU).

    Use it with :class:`~mosaic.agents.learners.PPOMuscle` and the same params. The networks
    start as the NumPy brain's do (drawn from ``context.rng``), minibatches are drawn in the same
    order, and the loss is the same: the clipped surrogate, ``value_coef`` times the value
    network's mean squared error and ``entropy_coef`` times the entropy, over the policy, the
    value network and the log std, with the gradient clipped to the global norm
    ``max_grad_norm``. After each update the NumPy copies of the networks follow, so
    :meth:`weights`, :meth:`greedy_checkpoint` and the advantages are computed as the NumPy
    brain computes them.

    :meth:`state` has the NumPy brain's keys and shapes (the Adam moments in the NumPy layout),
    so either brain loads the other's checkpoint.

    Setup sets torch's intra-op threads to 1: the networks are small, and more threads only
    contend for the cores with the run's other processes.
    """

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        torch.set_num_threads(1)
        self.torch_policy = torch_mlp(self.policy)
        self.torch_value = torch_mlp(self.value)
        self.torch_log_std = torch.nn.Parameter(torch.from_numpy(self.log_std.copy()))
        extra = [] if self.head.discrete else [self.torch_log_std]
        # The order of the NumPy brain's optimizer: policy, log std, value.
        self._torch_params = [*self.torch_policy.parameters(), *extra,
                              *self.torch_value.parameters()]
        self.torch_optimizer = torch.optim.Adam(self._torch_params, lr=self.params.learning_rate,
                                                eps=1e-8)

    # -- learning -------------------------------------------------------------------------
    def _update(self, rollout: _Rollout) -> None:
        super()._update(rollout)  # the epochs and metrics; each minibatch in _step below
        self._sync_numpy()

    def _step(self, rollout: _Rollout, rows: np.ndarray, totals: dict[str, float]) -> None:
        """One Adam step on the minibatch ``rows``; adds its stats to ``totals``."""
        params = self.params
        obs = torch.from_numpy(rollout.observations[rows])
        advantages = torch.from_numpy(rollout.advantages[rows])
        if params.normalize_advantages and rows.shape[0] > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std(unbiased=False)
                                                             + 1e-8)
        outputs = self.torch_policy(obs)
        if self.head.discrete:
            logits = outputs
            if rollout.masks is not None:
                mask = torch.from_numpy(rollout.masks[rows])
                logits = torch.where(mask, logits, torch.finfo(logits.dtype).min)
            all_log_probs = torch.log_softmax(logits, dim=-1)
            actions = torch.from_numpy(rollout.actions[rows].astype(np.int64))
            log_probs = all_log_probs.gather(1, actions[:, None])[:, 0]
            entropy = -(all_log_probs.exp() * all_log_probs).sum(dim=-1).mean()
        else:
            log_std = self.torch_log_std
            z = (torch.from_numpy(rollout.actions[rows]) - outputs) / log_std.exp()
            log_probs = (-0.5 * z * z - log_std - 0.5 * _LOG_2PI).sum(dim=1)
            entropy = log_std.sum() + 0.5 * self.head.size * (1.0 + _LOG_2PI)
        log_ratio = log_probs - torch.from_numpy(rollout.log_probs[rows])
        ratio = log_ratio.exp()
        surrogate = torch.minimum(ratio * advantages,
                                  ratio.clamp(1.0 - params.clip_range, 1.0 + params.clip_range)
                                  * advantages)
        policy_loss = -surrogate.mean() - params.entropy_coef * entropy
        error = self.torch_value(obs)[:, 0] - torch.from_numpy(rollout.returns[rows])
        value_loss = (error * error).mean()
        self.torch_optimizer.zero_grad()
        (policy_loss + params.value_coef * value_loss).backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(
            self._torch_params, params.max_grad_norm or float("inf")))
        self.torch_optimizer.step()
        with torch.no_grad():
            stats = (("policy_loss", policy_loss), ("value_loss", value_loss),
                     ("entropy", entropy), ("approx_kl", (ratio - 1.0 - log_ratio).mean()),
                     ("clip_fraction", ((ratio - 1.0).abs() > params.clip_range).double().mean()))
            for name, value in stats:
                totals[name] += float(value)
        totals["grad_norm"] += grad_norm

    def _sync_numpy(self) -> None:
        _to_numpy(self.torch_policy, self.policy)
        _to_numpy(self.torch_value, self.value)
        self.log_std[...] = self.torch_log_std.detach().numpy()

    # -- state ----------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """As :meth:`PPOBrain.state`: ``policy.*``, ``value.*``, ``log_std``, ``version`` and
        ``adam.t``, ``adam.m0``, ``adam.v0``, ... in the NumPy layout."""
        state = super().state()
        numpy_params = self.optimizer.params
        state["adam.t"] = np.array(self._adam_steps(), dtype=np.int64)
        for i, (param, like) in enumerate(zip(self._torch_params, numpy_params, strict=True)):
            moments = self.torch_optimizer.state.get(param, {})
            for key, name in (("exp_avg", "m"), ("exp_avg_sq", "v")):
                value = moments.get(key)
                array = np.zeros_like(like) if value is None else value.detach().numpy()
                # torch keeps a Linear's weight as (out, in); the NumPy MLP as (in, out).
                state[f"adam.{name}{i}"] = np.ascontiguousarray(
                    array.T if array.ndim == 2 and value is not None else array)
        return state

    def _adam_steps(self) -> int:
        for moments in self.torch_optimizer.state.values():
            return int(moments["step"])
        return 0

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        super()._load(state)  # the NumPy networks, log std, version, and a check of the moments
        _to_torch(self.policy, self.torch_policy)
        _to_torch(self.value, self.torch_value)
        with torch.no_grad():
            self.torch_log_std.copy_(torch.from_numpy(self.log_std.copy()))
        steps = int(state["adam.t"])
        self.torch_optimizer.state.clear()
        if steps:
            for i, param in enumerate(self._torch_params):
                moments: dict[str, Any] = {"step": torch.tensor(float(steps))}
                for key, name in (("exp_avg", "m"), ("exp_avg_sq", "v")):
                    array = np.asarray(state[f"adam.{name}{i}"], dtype=np.float64)
                    moments[key] = torch.from_numpy(np.ascontiguousarray(
                        array.T if array.ndim == 2 else array))
                self.torch_optimizer.state[param] = moments
