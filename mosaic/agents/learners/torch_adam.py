"""Adam with global-norm gradient clipping on PyTorch, over all parameters at once.

:class:`ClippedAdam` computes what ``torch.nn.utils.clip_grad_norm_`` followed by
``torch.optim.Adam.step`` compute, to the last bit (``tests/agents/test_torch_adam.py`` checks
it against them), but on the parameters' gradients and moments laid end to end in one tensor:
a step is a dozen torch calls instead of several per parameter. For networks as small as
PPO's on CartPole, those calls, not the arithmetic, were most of an Adam step.

Importing this module without PyTorch raises :class:`~mosaic.core.errors.MissingExtra`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mosaic.core.extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "ClippedAdam (Adam on PyTorch)", "torch")

__all__ = ["ClippedAdam"]


class ClippedAdam:
    """Adam (no weight decay, no AMSGrad) over ``params``, after scaling their gradients to a
    global 2-norm of at most ``max_grad_norm`` (``inf``: no clipping).

    :meth:`step` reads each parameter's ``.grad`` (all must be set, of the parameter's shape
    and dtype), scales the gradients in place as ``clip_grad_norm_`` does (by
    ``min(1, max_grad_norm / (norm + 1e-6))``), updates the moments and the parameters in place
    as ``torch.optim.Adam`` does, and returns the norm before clipping. ``exp_avg`` and
    ``exp_avg_sq`` are the moments, one view per parameter of its shape; ``steps`` counts the
    steps taken.
    """

    def __init__(self, params: Sequence[torch.Tensor], learning_rate: float,
                 max_grad_norm: float = float("inf"), betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = list(params)
        self.learning_rate, self.max_grad_norm, self.eps = learning_rate, max_grad_norm, eps
        self.beta1, self.beta2 = betas
        self._sizes = [p.numel() for p in self.params]
        like = self.params[0]
        self._m = torch.zeros(sum(self._sizes), dtype=like.dtype, device=like.device)
        self._v = torch.zeros_like(self._m)
        self._denominator = torch.empty_like(self._m)
        self.exp_avg = self._views(self._m)
        self.exp_avg_sq = self._views(self._v)
        self._denominators = self._views(self._denominator)
        self.steps = 0

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [part.view(p.shape) for part, p
                in zip(flat.split_with_sizes(self._sizes), self.params, strict=True)]

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        """One clipped Adam step from the parameters' gradients; the gradients' global norm
        before clipping (a 0-d tensor)."""
        grads = [p.grad for p in self.params]
        if any(g is None for g in grads):
            raise ValueError("ClippedAdam.step: a parameter has no gradient")
        flat = torch.cat([g.reshape(-1) for g in grads if g is not None])
        parts = list(flat.split_with_sizes(self._sizes))
        # clip_grad_norm_: the norm of the per-parameter norms, then one scale for all.
        norms = torch.stack(torch._foreach_norm(parts, 2.0))
        norm: torch.Tensor = torch.linalg.vector_norm(norms, 2.0)
        flat.mul_(torch.clamp(self.max_grad_norm / (norm + 1e-6), max=1.0))
        # torch.optim.Adam (its foreach path, which the per-parameter one equals).
        self.steps += 1
        self._m.lerp_(flat, 1.0 - self.beta1)
        self._v.mul_(self.beta2).addcmul_(flat, flat, value=1.0 - self.beta2)
        step_size = self.learning_rate / (1.0 - self.beta1 ** self.steps)
        torch.sqrt(self._v, out=self._denominator)
        self._denominator.div_((1.0 - self.beta2 ** self.steps) ** 0.5).add_(self.eps)
        torch._foreach_addcdiv_(self.params, self.exp_avg, self._denominators, -step_size)
        return norm

    def load(self, steps: int, exp_avg: Sequence[torch.Tensor],
             exp_avg_sq: Sequence[torch.Tensor]) -> None:
        """Go on from ``steps`` steps with these moments (one per parameter, of its shape)."""
        with torch.no_grad():
            for mine, theirs in zip([*self.exp_avg, *self.exp_avg_sq],
                                    [*exp_avg, *exp_avg_sq], strict=True):
                mine.copy_(theirs)
        self.steps = steps
