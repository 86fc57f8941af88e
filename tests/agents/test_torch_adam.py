"""ClippedAdam computes what clip_grad_norm_ and torch.optim.Adam compute, to the last bit,
and goes on exactly from loaded moments."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")

import torch

from mosaic.agents.learners.torch_adam import ClippedAdam

pytestmark = pytest.mark.timeout(60)

SHAPES = [(16, 4), (16,), (16, 16), (16,), (2, 16), (2,), (3,)]


def parameters(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=generator, dtype=torch.float64))
            for shape in SHAPES]


def set_gradients(params: list[torch.nn.Parameter], generator: torch.Generator) -> None:
    scale = float(torch.rand((), generator=generator, dtype=torch.float64)) * 4.0
    for param in params:
        param.grad = torch.randn(param.shape, generator=generator, dtype=torch.float64) * scale


@pytest.mark.parametrize("max_grad_norm", [float("inf"), 0.5])
def test_a_step_is_clip_grad_norm_then_torch_adam(max_grad_norm: float) -> None:
    theirs, mine = parameters(0), parameters(0)
    adam = torch.optim.Adam(theirs, lr=1e-3, eps=1e-8)
    clipped = ClippedAdam(mine, 1e-3, max_grad_norm, eps=1e-8)
    generators = [torch.Generator().manual_seed(1) for _ in range(2)]
    for _ in range(40):
        set_gradients(theirs, generators[0])
        set_gradients(mine, generators[1])
        expected_norm = torch.nn.utils.clip_grad_norm_(theirs, max_grad_norm)
        adam.step()
        assert torch.equal(clipped.step(), expected_norm)
    for i, (a, b) in enumerate(zip(theirs, mine, strict=True)):
        assert torch.equal(a, b), i
        assert torch.equal(adam.state[a]["exp_avg"], clipped.exp_avg[i]), i
        assert torch.equal(adam.state[a]["exp_avg_sq"], clipped.exp_avg_sq[i]), i
    assert clipped.steps == 40


def test_loaded_moments_go_on_as_the_uninterrupted_optimizer() -> None:
    first, second = parameters(0), parameters(0)
    original = ClippedAdam(first, 1e-2, 1.0)
    generator = torch.Generator().manual_seed(2)
    for _ in range(5):
        set_gradients(first, generator)
        original.step()
    with torch.no_grad():
        for a, b in zip(second, first, strict=True):
            a.copy_(b)
    resumed = ClippedAdam(second, 1e-2, 1.0)
    resumed.load(original.steps, original.exp_avg, original.exp_avg_sq)
    generators = [torch.Generator().manual_seed(3) for _ in range(2)]
    for _ in range(5):
        set_gradients(first, generators[0])
        set_gradients(second, generators[1])
        original.step()
        resumed.step()
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_a_parameter_without_a_gradient_is_refused() -> None:
    params = parameters(0)
    with pytest.raises(ValueError, match="has no gradient"):
        ClippedAdam(params, 1e-3).step()
