"""A small NumPy multi-layer perceptron, a softmax policy loss, and the Adam optimizer.

The network is the one :mod:`mosaic.agents.policies` reads as an ``mlp`` checkpoint: layers
``(W_i, b_i)`` with ``W_i`` of shape (in, out) and ``b_i`` of shape (out,), ``tanh`` on every
hidden layer and a linear last layer. Everything is float64 and batched: inputs are (N, in).
Backpropagation is written by hand; ``tests/agents/test_mlp.py`` checks it against finite
differences.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "MLP",
    "Adam",
    "log_softmax",
    "masked_logits",
    "masked_max",
    "sample_softmax",
    "softmax",
    "softmax_policy_loss",
    "softmax_policy_loss_from_log_probs",
]

Layers = list[tuple[np.ndarray, np.ndarray]]


def _orthogonal(rng: np.random.Generator, rows: int, cols: int, gain: float) -> np.ndarray:
    """A (rows, cols) matrix with orthonormal rows or columns, times ``gain``."""
    if gain == 0.0:
        return np.zeros((rows, cols))
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))  # makes the draw uniform over orthogonal matrices
    if rows < cols:
        q = q.T
    return np.ascontiguousarray(gain * q[:rows, :cols])


class MLP:
    """A fully connected network: ``tanh`` hidden layers and a linear output layer.

    ``sizes`` is ``[n_inputs, hidden..., n_outputs]``. Hidden weights are orthogonal with gain
    ``hidden_gain``, the last layer's with gain ``output_gain`` (``0`` gives a zero last layer,
    so a policy starts uniform whatever its hidden weights), and biases start at zero. The
    draws come only from ``rng``, so the same generator state gives the same network.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        rng: np.random.Generator,
        *,
        hidden_gain: float = 1.0,
        output_gain: float = 1.0,
    ) -> None:
        sizes = [int(size) for size in sizes]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"an MLP needs at least an input and an output size >= 1; got {sizes}")
        self.layers: Layers = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            gain = output_gain if i == len(sizes) - 2 else hidden_gain
            self.layers.append((_orthogonal(rng, n_in, n_out, gain), np.zeros(n_out)))

    @classmethod
    def from_layers(cls, layers: Sequence[tuple[np.ndarray, np.ndarray]]) -> MLP:
        """A network holding copies (float64) of ``[(W0, b0), (W1, b1), ...]``.

        Raises ``ValueError`` when the shapes do not chain.
        """
        net = cls.__new__(cls)
        net.layers = [(np.array(w, dtype=np.float64, order="C"), np.array(b, dtype=np.float64))
                      for w, b in layers]
        net._check()
        return net

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str = "") -> MLP:
        """The network stored by :meth:`to_arrays` under ``prefix`` (``W0``, ``b0``, ...)."""
        layers = []
        i = 0
        while f"{prefix}W{i}" in arrays:
            if f"{prefix}b{i}" not in arrays:
                raise ValueError(f"{prefix}W{i} has no matching {prefix}b{i}")
            layers.append((arrays[f"{prefix}W{i}"], arrays[f"{prefix}b{i}"]))
            i += 1
        if not layers:
            raise ValueError(f"no layers {prefix}W0, {prefix}b0, ... in the arrays given")
        return cls.from_layers(layers)

    def _check(self) -> None:
        if not self.layers:
            raise ValueError("an MLP needs at least one layer")
        width = None
        for i, (w, b) in enumerate(self.layers):
            if w.ndim != 2 or b.shape != (w.shape[1],):
                raise ValueError(f"layer {i}: W must be (in, out) and b (out,); got {w.shape}, "
                                 f"{b.shape}")
            if width is not None and w.shape[0] != width:
                raise ValueError(f"layer {i} takes {w.shape[0]} inputs; the previous gives {width}")
            width = w.shape[1]

    @property
    def n_inputs(self) -> int:
        """Size of one input vector."""
        return int(self.layers[0][0].shape[0])

    @property
    def n_outputs(self) -> int:
        """Size of one output vector."""
        return int(self.layers[-1][0].shape[1])

    def parameters(self) -> list[np.ndarray]:
        """``[W0, b0, W1, b1, ...]``: the arrays themselves, which optimizers update in place."""
        return [array for layer in self.layers for array in layer]

    def to_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Copies of the weights as ``{prefix + "W0": ..., prefix + "b0": ..., ...}``."""
        arrays: dict[str, np.ndarray] = {}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"{prefix}W{i}"] = w.copy()
            arrays[f"{prefix}b{i}"] = b.copy()
        return arrays

    def load_arrays(self, arrays: Mapping[str, np.ndarray], prefix: str = "") -> None:
        """Copy weights stored by :meth:`to_arrays` into this network, in place.

        Raises ``ValueError`` if a layer is missing or has another shape; then nothing changed.
        """
        new = []
        for i, (w, b) in enumerate(self.layers):
            try:
                nw, nb = arrays[f"{prefix}W{i}"], arrays[f"{prefix}b{i}"]
            except KeyError as exc:
                raise ValueError(f"missing array {exc.args[0]!r}") from exc
            if np.shape(nw) != w.shape or np.shape(nb) != b.shape:
                raise ValueError(f"layer {i}: expected {w.shape} and {b.shape}; got "
                                 f"{np.shape(nw)} and {np.shape(nb)}")
            new.append((nw, nb))
        for (w, b), (nw, nb) in zip(self.layers, new, strict=True):
            w[...] = nw
            b[...] = nb

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Outputs for inputs ``x`` of shape (N, n_inputs) or (n_inputs,)."""
        for w, b in self.layers[:-1]:
            x = _tanh_layer(x, w, b)
        w, b = self.layers[-1]
        out = x @ w
        out += b
        return out

    def forward_cached(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Outputs for a batch ``x`` (N, n_inputs), and the layer inputs :meth:`backward` needs."""
        inputs = [x]
        for w, b in self.layers[:-1]:
            x = _tanh_layer(x, w, b)
            inputs.append(x)
        w, b = self.layers[-1]
        out = x @ w
        out += b
        return out, inputs

    def backward(self, inputs: list[np.ndarray], grad_out: np.ndarray,
                 grad_features: np.ndarray | None = None) -> list[np.ndarray]:
        """Gradients ``[dW0, db0, dW1, db1, ...]`` of a scalar loss, given ``dloss/doutput``.

        ``inputs`` is what :meth:`forward_cached` returned for the same batch; ``grad_out`` has
        the outputs' shape (N, n_outputs). The order matches :meth:`parameters`.
        ``grad_features`` (N, last hidden size), when the loss also depends on the last hidden
        layer directly (``inputs[-1]``: gSDE's features), is that dependence's gradient.
        """
        grads: list[np.ndarray] = []
        delta = grad_out
        last = len(self.layers) - 1
        for i in range(last, -1, -1):
            w, _ = self.layers[i]
            x = inputs[i]
            grads.append(delta.sum(axis=0))
            grads.append(x.T @ delta)
            if i:
                # x = tanh(pre-activation), so d tanh = 1 - x**2.
                delta = delta @ w.T
                if i == last and grad_features is not None:
                    delta += grad_features
                delta *= _tanh_slope(x)
        grads.reverse()
        return grads

    def backward_input(self, inputs: list[np.ndarray], grad_out: np.ndarray) -> np.ndarray:
        """The gradient of a scalar loss with respect to the network's inputs (N, n_inputs),
        given ``dloss/doutput``; ``inputs`` and ``grad_out`` as for :meth:`backward`.

        An actor-critic learner takes ``dQ(s, a)/da`` this way (the action is part of the
        critic's input) without computing the critic's parameter gradients.
        """
        delta = grad_out
        for i in range(len(self.layers) - 1, -1, -1):
            w, _ = self.layers[i]
            delta = delta @ w.T
            if i:
                delta *= _tanh_slope(inputs[i])
        return delta


def _tanh_layer(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``tanh(x @ w + b)``, computed in the one new array (the same numbers)."""
    h = x @ w
    h += b
    out: np.ndarray = np.tanh(h, out=h)
    return out


def _tanh_slope(y: np.ndarray) -> np.ndarray:
    """``1 - y * y``, the derivative of ``tanh`` where it gave ``y``, in one new array."""
    slope = y * y
    out: np.ndarray = np.subtract(1.0, slope, out=slope)
    return out


def masked_logits(logits: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``logits`` with the entries where ``mask`` is false set to ``-inf`` (a copy if masked)."""
    if mask is None:
        return logits
    return np.where(np.asarray(mask, dtype=bool), logits, -np.inf)


def masked_max(values: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``values`` (N, n), the arg-max over the legal entries (ties to the lowest) and
    its value."""
    masked = np.where(masks, values, -np.inf)
    best = np.argmax(masked, axis=1)
    return best, masked[np.arange(values.shape[0]), best]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities along the last axis; ``-inf`` logits give ``-inf``."""
    top = np.max(logits, axis=-1, keepdims=True)
    shifted = logits - top
    result: np.ndarray = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return result


def softmax(logits: np.ndarray) -> np.ndarray:
    """Probabilities along the last axis; ``-inf`` logits get probability 0."""
    top = np.max(logits, axis=-1, keepdims=True)
    e = np.exp(logits - top)
    result: np.ndarray = e / np.sum(e, axis=-1, keepdims=True)
    return result


def sample_softmax(logits: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """One action per row of ``logits`` (N, n_actions), drawn from the row's softmax.

    ``uniforms`` (N,) in [0, 1) are the draws, so the caller's generator decides them: row ``i``
    gets the first action whose cumulative probability exceeds ``uniforms[i]`` times the row's
    total (an inverse-CDF draw). A ``-inf`` logit (a masked action) is never chosen; when
    rounding at the top of the cumulative sum would choose past the end or a masked action, the
    row gets its last action with a finite logit. Returns int64 actions of shape (N,).
    """
    n_actions = logits.shape[-1]
    cdf = np.cumsum(softmax(logits), axis=-1)
    thresholds = np.asarray(uniforms, dtype=np.float64) * cdf[:, -1]
    actions: np.ndarray = np.count_nonzero(cdf <= thresholds[:, None], axis=-1).astype(np.int64)
    np.minimum(actions, n_actions - 1, out=actions)
    finite = np.isfinite(logits)
    wrong = ~finite[np.arange(actions.shape[0]), actions]
    if wrong.any():
        # The last finite entry of each row: the first one of the reversed row.
        last = n_actions - 1 - np.argmax(finite[:, ::-1], axis=-1)
        actions[wrong] = last[wrong]
    return actions


def softmax_policy_loss(
    logits: np.ndarray,
    actions: np.ndarray,
    advantages: np.ndarray,
    entropy_coef: float = 0.0,
    mask: np.ndarray | None = None,
) -> tuple[float, np.ndarray, float]:
    """The policy-gradient loss of a softmax policy and its gradient with respect to ``logits``.

    ``loss = -mean(advantage * log pi(action)) - entropy_coef * mean(entropy)``, over a batch of
    N rows: ``logits`` (N, n_actions), ``actions`` (N,) integers, ``advantages`` (N,). Where
    ``mask`` (N, n_actions) is false the action is illegal: it gets probability 0 and no
    gradient. Returns ``(loss, dloss/dlogits, mean entropy)``.
    """
    return softmax_policy_loss_from_log_probs(log_softmax(masked_logits(logits, mask)),
                                              actions, advantages, entropy_coef)


def softmax_policy_loss_from_log_probs(
    logp: np.ndarray,
    actions: np.ndarray,
    advantages: np.ndarray,
    entropy_coef: float,
) -> tuple[float, np.ndarray, float]:
    """:func:`softmax_policy_loss` given ``logp`` (N, n_actions), the ``log_softmax`` of the
    masked logits, for a caller that has it already (the same numbers, computed once)."""
    n = logp.shape[0]
    p = np.exp(logp)
    rows = np.arange(n)
    # 0 * log 0 counts as 0 for illegal actions.
    legal = p > 0.0
    safe_logp = np.where(legal, logp, 0.0)
    plogp = np.where(legal, p * safe_logp, 0.0)
    entropy = -plogp.sum(axis=-1)
    mean_entropy = entropy.mean()
    loss = -(advantages * logp[rows, actions]).mean() - entropy_coef * mean_entropy
    # d log pi(a) / dz = onehot(a) - p ;  d H / dz = -p * (log p + H)
    grad = p * advantages[:, None]
    grad[rows, actions] -= advantages
    if entropy_coef:
        grad += entropy_coef * p * (safe_logp + entropy[:, None])
    grad /= n
    return float(loss), grad, float(mean_entropy)


class Adam:
    """The Adam optimizer, updating a list of arrays in place.

    ``step(grads)`` takes gradients in the order of ``params`` and moves each parameter against
    its gradient. ``max_grad_norm`` (optional) first rescales all gradients together so that
    their global norm is at most that value. :meth:`state` / :meth:`load_state` round-trip the
    moment estimates and the step count exactly.
    """

    def __init__(
        self,
        params: Sequence[np.ndarray],
        learning_rate: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        max_grad_norm: float | None = None,
    ) -> None:
        self.params = list(params)
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.max_grad_norm = max_grad_norm
        # The moments of all parameters, end to end, so that a step is a few operations on one
        # array rather than a few per parameter (the arithmetic, element by element, is the
        # same); ``m`` and ``v`` are views of them in the parameters' shapes.
        self._bounds = np.cumsum([0, *(p.size for p in self.params)]).tolist()
        total = self._bounds[-1]
        self._m, self._v = np.zeros(total), np.zeros(total)
        self._grad, self._scratch, self._denominator = (np.empty(total), np.empty(total),
                                                        np.empty(total))
        self.m = self._views(self._m)
        self.v = self._views(self._v)
        self._updates = self._views(self._scratch)  # the step of each parameter
        self.t = 0

    def _views(self, flat: np.ndarray) -> list[np.ndarray]:
        """``flat`` cut into views of the parameters' shapes."""
        return [flat[start:end].reshape(p.shape) for p, start, end
                in zip(self.params, self._bounds[:-1], self._bounds[1:], strict=True)]

    def step(self, grads: Sequence[np.ndarray], norm: float | None = None) -> None:
        """Apply one update with ``grads`` (same shapes and order as the parameters).

        ``norm`` is their global norm, ``sqrt(sum(sum(g * g)))``, when the caller has it
        already; it is computed here when ``max_grad_norm`` needs it and it is not given.
        """
        if len(grads) != len(self.params):
            raise ValueError(f"expected {len(self.params)} gradients, got {len(grads)}")
        scale = 1.0
        if self.max_grad_norm is not None:
            if norm is None:
                norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
            if norm > self.max_grad_norm:
                scale = self.max_grad_norm / norm
        for p, g in zip(self.params, grads, strict=True):
            if np.shape(g) != p.shape:
                raise ValueError(f"a gradient of shape {np.shape(g)} for a parameter of shape "
                                 f"{p.shape}")
        self.t += 1
        if not self.params:
            return
        b1, b2 = self.beta1, self.beta2
        step = self.learning_rate * np.sqrt(1.0 - b2**self.t) / (1.0 - b1**self.t)
        g, scratch, m, v = self._grad, self._scratch, self._m, self._v
        np.concatenate([np.ravel(part) for part in grads], out=g)  # float64, as the moments
        if scale != 1.0:
            g *= scale
        m *= b1
        m += np.multiply(1.0 - b1, g, out=scratch)
        v *= b2
        np.multiply(1.0 - b2, g, out=scratch)
        scratch *= g
        v += scratch
        np.sqrt(v, out=self._denominator)
        self._denominator += self.eps
        np.multiply(step, m, out=scratch)
        scratch /= self._denominator
        for p, update in zip(self.params, self._updates, strict=True):
            p -= update

    def state(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Copies of the moments (``m0``, ``v0``, ...) and the step count ``t``, under
        ``prefix``."""
        arrays = {f"{prefix}t": np.array(self.t, dtype=np.int64)}
        for i, (m, v) in enumerate(zip(self.m, self.v, strict=True)):
            arrays[f"{prefix}m{i}"] = m.copy()
            arrays[f"{prefix}v{i}"] = v.copy()
        return arrays

    def load_state(self, arrays: Mapping[str, np.ndarray], prefix: str = "") -> None:
        """Restore what :meth:`state` returned; ``ValueError`` if an array is missing or
        misshaped."""
        try:
            t = int(arrays[f"{prefix}t"])
            ms = [np.asarray(arrays[f"{prefix}m{i}"], dtype=np.float64)
                  for i in range(len(self.params))]
            vs = [np.asarray(arrays[f"{prefix}v{i}"], dtype=np.float64)
                  for i in range(len(self.params))]
        except KeyError as exc:
            raise ValueError(f"missing optimizer array {exc.args[0]!r}") from exc
        for p, m, v in zip(self.params, ms, vs, strict=True):
            if m.shape != p.shape or v.shape != p.shape:
                raise ValueError(f"optimizer moments of shape {m.shape}/{v.shape} for a "
                                 f"parameter of shape {p.shape}")
        self.t = t
        for mine, m in zip(self.m, ms, strict=True):
            mine[...] = m
        for mine, v in zip(self.v, vs, strict=True):
            mine[...] = v
