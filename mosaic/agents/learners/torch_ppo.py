"""PPO's brain on PyTorch: :class:`TorchPPOBrain`, the deep-learning path (the ``torch`` extra).

It learns what :class:`~mosaic.agents.learners.PPOBrain` learns, with the same params, rollout,
metrics, checkpoint and state format, but takes its gradients with ``torch.autograd`` and steps
Adam as ``torch.optim.Adam`` does (:class:`~mosaic.agents.learners.torch_adam.ClippedAdam`).
Its muscle is the NumPy :class:`~mosaic.agents.learners.PPOMuscle`: the brain answers with the
policy as NumPy arrays, so an environment's process never imports torch.

Importing this module without PyTorch raises :class:`~mosaic.core.errors.MissingExtra`, which
names the extra to install (``pip install 'mosaic[torch]'``); only the torch learners' modules
import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from mosaic.agents.context import BrainContext
from mosaic.agents.learners.mlp import MLP
from mosaic.agents.learners.ppo_brain import PPOBrain, _Rollout
from mosaic.core.extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "TorchPPOBrain (PPO on PyTorch)", "torch")

# After the check above, so that a missing torch is reported as TorchPPOBrain's extra.
from mosaic.agents.learners.torch_adam import ClippedAdam

__all__ = ["TorchPPOBrain", "torch_mlp"]

_LOG_2PI = float(np.log(2.0 * np.pi))
#: The order of the stats :meth:`TorchPPOBrain._step` takes from one tensor.
_STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")


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


def _forward(linears: list[torch.nn.Linear], x: torch.Tensor) -> torch.Tensor:
    """What the ``torch_mlp`` of ``linears`` computes for ``x``, called without the modules'
    hooks (the same operations: ``linear``, then ``tanh`` on all but the last)."""
    for linear in linears[:-1]:
        x = torch.tanh(torch.nn.functional.linear(x, linear.weight, linear.bias))
    last = linears[-1]
    return torch.nn.functional.linear(x, last.weight, last.bias)


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
    ``max_grad_norm`` (:class:`~mosaic.agents.learners.torch_adam.ClippedAdam`: what
    ``clip_grad_norm_`` and ``torch.optim.Adam`` compute, in fewer calls). After each update
    the NumPy copies of the networks follow, so :meth:`weights`, :meth:`greedy_checkpoint` and
    the advantages are computed as the NumPy brain computes them. ``anneal_steps`` anneals the
    learning rate and clip range as the NumPy brain does.

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
        self.torch_optimizer = ClippedAdam(self._torch_params, self.params.learning_rate,
                                           self.params.max_grad_norm or float("inf"), eps=1e-8)
        self._policy_linears = [m for m in self.torch_policy if isinstance(m, torch.nn.Linear)]
        self._value_linears = [m for m in self.torch_value if isinstance(m, torch.nn.Linear)]

    # -- learning -------------------------------------------------------------------------
    def _update(self, rollout: _Rollout) -> None:
        super()._update(rollout)  # the epochs and metrics; each minibatch in _step below
        self._sync_numpy()

    def _set_learning_rate(self, rate: float) -> None:
        """The torch optimizer's learning rate from now on (``anneal_steps``)."""
        self.torch_optimizer.learning_rate = rate

    def _step(self, rollout: _Rollout, rows: slice, totals: dict[str, float]) -> None:
        """One Adam step on the minibatch ``rows`` of the epoch's shuffled ``rollout``; adds its
        stats to ``totals``."""
        params, clip_range = self.params, self.clip_range  # clip_range: annealed, if asked
        # Slices of the shuffled rollout are views: torch reads them without a copy.
        obs = torch.from_numpy(rollout.observations[rows])
        advantages = torch.from_numpy(rollout.advantages[rows])
        if params.normalize_advantages and advantages.shape[0] > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std(unbiased=False)
                                                             + 1e-8)
        outputs = _forward(self._policy_linears, obs)
        if self.head.discrete:
            logits = outputs
            if rollout.masks is not None:
                mask = torch.from_numpy(rollout.masks[rows])
                logits = torch.where(mask, logits, torch.finfo(logits.dtype).min)
            all_log_probs = torch.log_softmax(logits, dim=-1)
            actions = torch.from_numpy(rollout.actions[rows].astype(np.int64, copy=False))
            log_probs = all_log_probs.gather(1, actions[:, None])[:, 0]
            # Without an entropy bonus the entropy is a metric: its gradient would be zeros.
            with torch.set_grad_enabled(bool(params.entropy_coef)):
                entropy = -(all_log_probs.exp() * all_log_probs).sum(dim=-1).mean()
        else:
            log_std = self.torch_log_std
            z = (torch.from_numpy(rollout.actions[rows]) - outputs) / log_std.exp()
            log_probs = (-0.5 * z * z - log_std - 0.5 * _LOG_2PI).sum(dim=1)
            entropy = log_std.sum() + 0.5 * self.head.size * (1.0 + _LOG_2PI)
        log_ratio = log_probs - torch.from_numpy(rollout.log_probs[rows])
        ratio = log_ratio.exp()
        surrogate = torch.minimum(ratio * advantages,
                                  ratio.clamp(1.0 - clip_range, 1.0 + clip_range)
                                  * advantages)
        policy_loss = -surrogate.mean() - params.entropy_coef * entropy
        error = _forward(self._value_linears, obs)[:, 0] - torch.from_numpy(rollout.returns[rows])
        value_loss = (error * error).mean()
        for param in self._torch_params:
            param.grad = None
        loss: torch.Tensor = policy_loss + params.value_coef * value_loss
        loss.backward()  # type: ignore[no-untyped-call]
        grad_norm = self.torch_optimizer.step()
        with torch.no_grad():
            stats = torch.stack([
                policy_loss, value_loss, torch.as_tensor(entropy, dtype=torch.float64),
                (ratio - 1.0 - log_ratio).mean(),
                ((ratio - 1.0).abs() > clip_range).double().mean(), grad_norm]).tolist()
        for name, value in zip(_STATS, stats, strict=True):
            totals[name] += value

    def _sync_numpy(self) -> None:
        _to_numpy(self.torch_policy, self.policy)
        _to_numpy(self.torch_value, self.value)
        self.log_std[...] = self.torch_log_std.detach().numpy()

    # -- state ----------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """As :meth:`PPOBrain.state`: ``policy.*``, ``value.*``, ``log_std``, ``version`` and
        ``adam.t``, ``adam.m0``, ``adam.v0``, ... in the NumPy layout."""
        state = super().state()
        optimizer = self.torch_optimizer
        state["adam.t"] = np.array(optimizer.steps, dtype=np.int64)
        for name, moments in (("m", optimizer.exp_avg), ("v", optimizer.exp_avg_sq)):
            for i, moment in enumerate(moments):
                array = moment.numpy()
                # torch keeps a Linear's weight as (out, in); the NumPy MLP as (in, out).
                state[f"adam.{name}{i}"] = np.ascontiguousarray(
                    array.T if array.ndim == 2 else array)
        return state

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        super()._load(state)  # the NumPy networks, log std, version, and a check of the moments
        _to_torch(self.policy, self.torch_policy)
        _to_torch(self.value, self.torch_value)
        with torch.no_grad():
            self.torch_log_std.copy_(torch.from_numpy(self.log_std.copy()))
        moments: dict[str, list[torch.Tensor]] = {"m": [], "v": []}
        for name, loaded in moments.items():
            for i in range(len(self._torch_params)):
                array = np.asarray(state[f"adam.{name}{i}"], dtype=np.float64)
                loaded.append(torch.from_numpy(np.ascontiguousarray(
                    array.T if array.ndim == 2 else array)))
        self.torch_optimizer.load(int(state["adam.t"]), moments["m"], moments["v"])
