"""A NumPy :class:`~mosaic.agents.learners.MLP` as torch tensors that share its memory.

The torch learners (:mod:`~mosaic.agents.learners.torch_ppo`,
:mod:`~mosaic.agents.learners.torch_actor_critic`) differentiate and step their NumPy brain's
own networks: ``torch.from_numpy`` shares the arrays, and a NumPy MLP is already laid out as
``x @ W + b``. So an Adam step in torch is at once the NumPy network's new weights, with no
copy per update, and the weights muscles get and the checkpoints are the NumPy brain's own.

Importing this module without PyTorch raises :class:`~mosaic.core.errors.MissingExtra`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic.agents.learners.mlp import MLP
from mosaic.core.extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "TorchView (the torch learners' networks)", "torch")

__all__ = ["TorchView"]


class TorchView:
    """``network`` as torch tensors sharing its arrays' memory: what torch changes in place, the
    NumPy network holds, and the other way round (:meth:`MLP.load_arrays`, the Polyak updates
    and the optimizers all write into the arrays, never replace them). ``trainable`` tensors
    require gradients."""

    def __init__(self, network: MLP, *, trainable: bool = False) -> None:
        self.layers = [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in network.layers]
        if trainable:
            for tensor in self.parameters():
                tensor.requires_grad_(True)

    def parameters(self) -> list[torch.Tensor]:
        """``[W0, b0, W1, b1, ...]``, in the order of :meth:`MLP.parameters`."""
        return [tensor for layer in self.layers for tensor in layer]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.with_features(x)[0]

    def with_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The outputs for ``x`` and the last hidden layer's. A layer is one ``addmm`` (one
        node for autograd): for networks this small, torch's calls cost more than their
        arithmetic."""
        for w, b in self.layers[:-1]:
            x = torch.tanh(torch.addmm(b, x, w))
        w, b = self.layers[-1]
        return torch.addmm(b, x, w), x
