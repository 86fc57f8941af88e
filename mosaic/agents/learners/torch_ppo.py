"""PPO's brain on PyTorch: :class:`TorchPPOBrain`, the deep-learning path (the ``torch`` extra).

It learns what :class:`~mosaic.agents.learners.PPOBrain` learns, with the same params, rollout,
metrics, checkpoint and state format, but backpropagates through its networks with
``torch.autograd`` and steps Adam as ``torch.optim.Adam`` does
(:class:`~mosaic.agents.learners.torch_adam.ClippedAdam`). The networks are torch views of the
NumPy brain's own (:class:`~mosaic.agents.learners.torch_view.TorchView`), so each step is at
once the NumPy networks' new weights.
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
from mosaic.agents.learners.ppo_brain import PPOBrain, _minibatch, _Rollout
from mosaic.agents.learners.ppo_policy import loss_gradients
from mosaic.core.extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "TorchPPOBrain (PPO on PyTorch)", "torch")

# After the check above, so that a missing torch is reported as TorchPPOBrain's extra.
from mosaic.agents.learners.torch_adam import ClippedAdam
from mosaic.agents.learners.torch_view import TorchView

__all__ = ["TorchPPOBrain"]



class TorchPPOBrain(PPOBrain):
    """:class:`~mosaic.agents.learners.PPOBrain` with its update on PyTorch (float64, CPU).

    Use it with :class:`~mosaic.agents.learners.PPOMuscle` and the same params. The networks
    start as the NumPy brain's do (drawn from ``context.rng``), minibatches are drawn in the same
    order, and the loss is the same: the clipped surrogate, ``value_coef`` times the value
    network's mean squared error and ``entropy_coef`` times the entropy, over the policy, the
    value network and the log std, with the gradient clipped to the global norm
    ``max_grad_norm`` (:class:`~mosaic.agents.learners.torch_adam.ClippedAdam`: what
    ``clip_grad_norm_`` and ``torch.optim.Adam`` compute, in fewer calls). The loss's gradient
    with respect to the networks' outputs is the NumPy brain's closed form
    (:func:`~mosaic.agents.learners.ppo_policy.loss_gradients`), and autograd takes it back
    through the networks (see :meth:`_step` for why). The torch
    tensors share the NumPy networks' memory, so :meth:`weights`, :meth:`greedy_checkpoint` and
    the advantages are computed as the NumPy brain computes them, with no copy. ``anneal_steps``
    anneals the learning rate and clip range as the NumPy brain does.

    :meth:`state` has the NumPy brain's keys and shapes (the Adam moments in the NumPy layout),
    so either brain loads the other's checkpoint.

    Setup sets torch's intra-op threads to 1: the networks are small, and more threads only
    contend for the cores with the run's other processes.
    """

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        torch.set_num_threads(1)
        self.torch_policy = TorchView(self.policy, trainable=True)
        self.torch_value = TorchView(self.value, trainable=True)
        # The NumPy log std's memory too; trained for a Gaussian head only.
        self.torch_log_std = torch.from_numpy(self.log_std)
        extra = [] if self.head.discrete else [self.torch_log_std.requires_grad_(True)]
        # The order of the NumPy brain's optimizer: policy, log std, value.
        self._torch_params = [*self.torch_policy.parameters(), *extra,
                              *self.torch_value.parameters()]
        self.torch_optimizer = ClippedAdam(self._torch_params, self.params.learning_rate,
                                           self.params.max_grad_norm or float("inf"), eps=1e-8)

    # -- learning -------------------------------------------------------------------------
    def _set_learning_rate(self, rate: float) -> None:
        """The torch optimizer's learning rate from now on (``anneal_steps``)."""
        self.torch_optimizer.learning_rate = rate

    def _step(self, rollout: _Rollout, rows: slice, totals: dict[str, float]) -> None:
        """One Adam step on the minibatch ``rows`` of the epoch's shuffled ``rollout``; adds its
        stats to ``totals``.

        The networks run forward on torch; the loss's gradient with respect to their outputs
        (and to the log std) is :func:`~mosaic.agents.learners.ppo_policy.loss_gradients`,
        the NumPy brain's own, and autograd carries it back through the networks. For networks
        this small each torch call costs more than its arithmetic: the loss written as two
        dozen differentiable torch calls cost about 0.54 ms a minibatch of 64, close to half of
        what both networks' forward and backward passes cost (1.2 ms)."""
        batch = _minibatch(rollout, rows)
        # Slices of the shuffled rollout are views: torch reads them without a copy.
        obs = torch.from_numpy(batch.observations)
        outputs, values = self.torch_policy(obs), self.torch_value(obs)
        gradients = loss_gradients(self.head, self.log_std, self.params,
                                   batch, outputs.detach().numpy(), values.detach().numpy(),
                                   self.clip_range)  # clip_range: annealed, if asked
        for param in self._torch_params:
            param.grad = None
        torch.autograd.backward((outputs, values), (torch.from_numpy(gradients.policy_outputs),
                                                    torch.from_numpy(gradients.values)))
        if gradients.log_std is not None:
            self.torch_log_std.grad = torch.from_numpy(gradients.log_std)
        gradients.add_stats(totals, float(self.torch_optimizer.step()))

    # -- state ----------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """As :meth:`PPOBrain.state`: ``policy.*``, ``value.*``, ``log_std``, ``version``,
        ``steps`` and ``adam.t``, ``adam.m0``, ``adam.v0``, ... (the torch optimizer's)."""
        state = super().state()
        optimizer = self.torch_optimizer
        state["adam.t"] = np.array(optimizer.steps, dtype=np.int64)
        for name, moments in (("m", optimizer.exp_avg), ("v", optimizer.exp_avg_sq)):
            for i, moment in enumerate(moments):
                state[f"adam.{name}{i}"] = moment.numpy().copy()
        return state

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        # The NumPy networks and log std, in place (so the torch views hold them too), the
        # version, and a check of the moments' shapes.
        super()._load(state)
        moments = {name: [torch.from_numpy(np.asarray(state[f"adam.{name}{i}"], np.float64))
                          for i in range(len(self._torch_params))] for name in ("m", "v")}
        self.torch_optimizer.load(int(state["adam.t"]), moments["m"], moments["v"])
