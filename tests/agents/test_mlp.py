"""The NumPy MLP, the softmax policy loss and Adam: gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from mosaic.agents.learners import MLP, Adam, log_softmax, softmax, softmax_policy_loss
from mosaic.agents.policies import load_policy, save_mlp

pytestmark = pytest.mark.timeout(30)


def numeric_gradient(f, array: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to ``array``, changed in place."""
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        saved = array[index]
        array[index] = saved + eps
        up = f()
        array[index] = saved - eps
        down = f()
        array[index] = saved
        grad[index] = (up - down) / (2 * eps)
    return grad


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1e-8, np.max(np.abs(a)) + np.max(np.abs(b))))


def test_backward_matches_finite_differences():
    rng = np.random.default_rng(0)
    net = MLP([3, 5, 4, 2], rng, output_gain=0.7)
    for _, b in net.layers:  # non-zero biases exercise every term
        b[...] = rng.standard_normal(b.shape)
    x = rng.standard_normal((6, 3))
    upstream = rng.standard_normal((6, 2))

    def loss() -> float:
        return float(np.sum(upstream * net.forward(x)))

    _, inputs = net.forward_cached(x)
    grads = net.backward(inputs, upstream)
    assert len(grads) == len(net.parameters())
    for param, grad in zip(net.parameters(), grads, strict=True):
        assert grad.shape == param.shape
        assert relative_error(grad, numeric_gradient(loss, param)) < 1e-7


@pytest.mark.parametrize("sizes", [[4, 6, 5, 1], [3, 2]])
def test_input_gradient_matches_finite_differences(sizes):
    rng = np.random.default_rng(1)
    net = MLP(sizes, rng, output_gain=0.7)
    for _, b in net.layers:
        b[...] = rng.standard_normal(b.shape)
    x = rng.standard_normal((5, sizes[0]))
    upstream = rng.standard_normal((5, sizes[-1]))

    def loss() -> float:
        return float(np.sum(upstream * net.forward(x)))

    _, inputs = net.forward_cached(x)
    grad = net.backward_input(inputs, upstream)
    assert grad.shape == x.shape
    assert relative_error(grad, numeric_gradient(loss, x)) < 1e-7


def test_policy_loss_gradient_matches_finite_differences_with_entropy_and_mask():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((5, 4))
    actions = np.array([0, 3, 1, 2, 3])
    advantages = rng.standard_normal(5)
    mask = np.ones((5, 4), dtype=bool)
    mask[1, 0] = mask[2, 3] = mask[4, :2] = False
    for entropy_coef, m in [(0.0, None), (0.3, None), (0.3, mask)]:
        loss, grad, _ = softmax_policy_loss(logits, actions, advantages, entropy_coef, m)
        numeric = numeric_gradient(
            lambda c=entropy_coef, m=m: softmax_policy_loss(logits, actions, advantages, c, m)[0],
            logits)
        assert np.isfinite(loss)
        assert relative_error(grad, numeric) < 1e-7
        if m is not None:
            assert np.all(grad[~m] == 0.0)


def test_policy_loss_through_the_network_matches_finite_differences():
    rng = np.random.default_rng(2)
    net = MLP([4, 8, 3], rng, output_gain=1.0)
    x = rng.standard_normal((7, 4))
    actions = rng.integers(0, 3, 7)
    advantages = rng.standard_normal(7)

    def loss() -> float:
        return softmax_policy_loss(net.forward(x), actions, advantages, 0.05)[0]

    logits, inputs = net.forward_cached(x)
    _, dlogits, _ = softmax_policy_loss(logits, actions, advantages, 0.05)
    for param, grad in zip(net.parameters(), net.backward(inputs, dlogits), strict=True):
        assert relative_error(grad, numeric_gradient(loss, param)) < 1e-7


def test_softmax_and_log_softmax_are_stable_and_mask_with_minus_infinity():
    logits = np.array([[1000.0, 1000.0, -np.inf], [0.0, np.log(3.0), -1e9]])
    p = softmax(logits)
    assert np.allclose(p, [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]])
    assert np.allclose(np.exp(log_softmax(logits)), p)


def test_same_generator_state_gives_the_same_network_and_zero_output_gain_is_uniform():
    a = MLP([4, 16, 16, 2], np.random.default_rng(5), output_gain=0.0)
    b = MLP([4, 16, 16, 2], np.random.default_rng(5), output_gain=0.0)
    c = MLP([4, 16, 16, 2], np.random.default_rng(6), output_gain=0.0)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert np.array_equal(pa, pb)
    assert not np.array_equal(a.layers[0][0], c.layers[0][0])
    assert np.all(a.layers[-1][0] == 0.0)
    assert np.all(a.forward(np.ones((3, 4))) == 0.0)


def test_weights_match_the_mlp_checkpoint_format(tmp_path):
    rng = np.random.default_rng(3)
    net = MLP([4, 6, 2], rng)
    path = save_mlp(tmp_path / "policy", net.layers)
    policy = load_policy(path)
    x = rng.standard_normal(4)
    assert np.allclose(policy.action_values(x), net.forward(x), rtol=0, atol=1e-12)
    copy = MLP.from_arrays(net.to_arrays("p."), "p.")
    assert np.array_equal(copy.forward(x), net.forward(x))
    with pytest.raises(ValueError, match="expected"):
        MLP([4, 5, 2], rng).load_arrays(net.to_arrays())


def test_adam_minimises_a_quadratic_and_its_state_round_trips():
    target = np.array([1.0, -2.0, 3.0])
    w = np.zeros(3)
    adam = Adam([w], learning_rate=0.1)
    for _ in range(500):
        adam.step([2 * (w - target)])
    assert np.allclose(w, target, atol=1e-3)

    twin_w = w.copy()
    twin = Adam([twin_w], learning_rate=0.1)
    twin.load_state(adam.state())
    for _ in range(3):
        adam.step([2 * (w - target) + 1.0])
        twin.step([2 * (twin_w - target) + 1.0])
    assert np.array_equal(w, twin_w)


def test_adam_clips_the_global_gradient_norm():
    w = np.zeros(2)
    adam = Adam([w], learning_rate=1.0, max_grad_norm=1.0)
    adam.step([np.array([300.0, 400.0])])
    # The first Adam step has size learning_rate per coordinate whatever the scale; the moments
    # show the clipping: m = (1 - beta1) * g / |g|.
    assert np.allclose(adam.m[0], 0.1 * np.array([0.6, 0.8]))
