"""The NumPy Adam steps all parameters at once: the same numbers, to the last bit, as the
textbook per-parameter loop, with and without clipping, and a malformed gradient is refused."""

from __future__ import annotations

import numpy as np
import pytest

from mosaic.agents.learners import Adam

pytestmark = pytest.mark.timeout(30)

SHAPES = [(4, 16), (16,), (16, 16), (16,), (16, 2), (2,)]


def reference_step(params: list[np.ndarray], grads: list[np.ndarray], m: list[np.ndarray],
                   v: list[np.ndarray], t: int, max_grad_norm: float | None) -> None:
    """Adam as written per parameter (the order of operations the learners' digests pin)."""
    scale = 1.0
    if max_grad_norm is not None:
        norm = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
        if norm > max_grad_norm:
            scale = max_grad_norm / norm
    step = 1e-3 * np.sqrt(1.0 - 0.999**t) / (1.0 - 0.9**t)
    for p, g, m_i, v_i in zip(params, grads, m, v, strict=True):
        g = g * scale
        m_i *= 0.9
        m_i += (1.0 - 0.9) * g
        v_i *= 0.999
        v_i += (1.0 - 0.999) * g * g
        p -= step * m_i / (np.sqrt(v_i) + 1e-8)


@pytest.mark.parametrize("max_grad_norm", [None, 0.5])
def test_a_step_over_all_parameters_gives_the_per_parameter_numbers(
        max_grad_norm: float | None) -> None:
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(shape) for shape in SHAPES]
    expected = [p.copy() for p in params]
    m = [np.zeros(shape) for shape in SHAPES]
    v = [np.zeros(shape) for shape in SHAPES]
    adam = Adam(params, 1e-3, max_grad_norm=max_grad_norm)
    for t in range(1, 51):
        grads = [rng.standard_normal(shape) * rng.choice([0.01, 1.0]) for shape in SHAPES]
        reference_step(expected, grads, m, v, t, max_grad_norm)
        adam.step(grads)
    for name, mine, theirs in (("params", params, expected), ("m", adam.m, m), ("v", adam.v, v)):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert np.array_equal(a, b), f"{name}[{i}]"
    # The moments are the state's, in the parameters' shapes.
    assert [adam.state()[f"m{i}"].shape for i in range(len(SHAPES))] == SHAPES


def test_a_gradient_of_another_shape_is_refused_and_nothing_changes() -> None:
    w = np.ones((2, 3))
    adam = Adam([w])
    with pytest.raises(ValueError, match=r"shape \(3, 2\) for a parameter of shape \(2, 3\)"):
        adam.step([np.ones((3, 2))])
    assert adam.t == 0
    assert np.array_equal(w, np.ones((2, 3)))
