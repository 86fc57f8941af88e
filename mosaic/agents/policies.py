"""Greedy-policy checkpoints: the file format mosaic's learners write and the RL worker reads.

A checkpoint is an ``.npz`` file (read with ``allow_pickle=False``, so it holds arrays only) with:

* ``format``: a 0-d unicode array, ``"q_table"`` or ``"mlp"``;
* ``version`` (optional): a 0-d integer array, 1;
* for ``q_table``: ``q`` of shape (n_states, n_actions); the observation is a state index and the
  action is ``argmax q[state]``;
* for ``mlp``: ``W0, b0, W1, b1, ...`` with ``W_i`` of shape (in_i, out_i) and ``b_i`` of shape
  (out_i,); hidden layers use ``tanh``, the last layer is linear and gives one logit per discrete
  action; the observation is flattened to a float vector of size ``in_0``.

In both cases the action is the arg-max over the legal actions when a legal-action list is given
(ties go to the lowest index). A phase's checkpoint (:mod:`mosaic.core.checkpoints`) holds these
arrays too, beside the learner's whole state, so it reads as a policy checkpoint as well.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mosaic.core.errors import MosaicError

__all__ = [
    "CHECKPOINT_VERSION",
    "GreedyPolicy",
    "MLPPolicy",
    "PolicyFileError",
    "QTablePolicy",
    "load_policy",
    "mlp_arrays",
    "q_table_arrays",
    "save_mlp",
    "save_q_table",
]

CHECKPOINT_VERSION = 1


class PolicyFileError(MosaicError):
    """A policy checkpoint is missing, unreadable or malformed (``path`` names it)."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"policy checkpoint {self.path}: {reason}")


class GreedyPolicy(Protocol):
    """A deterministic policy over ``n_actions`` discrete actions."""

    kind: str
    n_actions: int

    def action_values(self, observation: Any) -> np.ndarray:
        """One value (Q-value or logit) per action."""

    def act(self, observation: Any, legal_actions: Sequence[int] | None = None) -> int:
        """The legal action with the highest value."""


def _masked_argmax(values: np.ndarray, legal_actions: Sequence[int] | None) -> int:
    if legal_actions is None:
        return int(np.argmax(values))
    legal = np.asarray(list(legal_actions), dtype=np.int64)
    if legal.size == 0:
        raise ValueError("no legal actions to choose from")
    if legal.min() < 0 or legal.max() >= values.shape[0]:
        raise ValueError(f"legal actions {legal.tolist()} outside 0..{values.shape[0] - 1}")
    masked = np.full(values.shape, -np.inf)
    masked[legal] = values[legal]
    return int(np.argmax(masked))


class QTablePolicy:
    """Greedy policy over a table ``q`` of shape (n_states, n_actions)."""

    kind = "q_table"

    def __init__(self, q: np.ndarray) -> None:
        q = np.asarray(q, dtype=np.float64)
        if q.ndim != 2 or q.shape[0] == 0 or q.shape[1] == 0:
            raise ValueError(f"q must have shape (n_states, n_actions); got {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ValueError("q holds NaN or infinite values")
        self.q = q
        self.n_states, self.n_actions = int(q.shape[0]), int(q.shape[1])

    def action_values(self, observation: Any) -> np.ndarray:
        """The row of ``q`` for the state index ``observation``; ``ValueError`` if not a state."""
        state = np.asarray(observation)
        value = state.reshape(()).item() if state.size == 1 and state.dtype.kind in "iuf" else None
        if value is None or not float(value).is_integer():
            raise ValueError(f"a q_table policy needs an integer state; got {observation!r:.80}")
        index = int(value)
        if not 0 <= index < self.n_states:
            raise ValueError(f"state {index} outside 0..{self.n_states - 1}")
        row: np.ndarray = self.q[index]
        return row

    def act(self, observation: Any, legal_actions: Sequence[int] | None = None) -> int:
        """``argmax q[observation]`` over the legal actions."""
        return _masked_argmax(self.action_values(observation), legal_actions)


class MLPPolicy:
    """Greedy policy of a tanh multi-layer perceptron with linear output logits."""

    kind = "mlp"

    def __init__(self, layers: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        if not layers:
            raise ValueError("an mlp needs at least one layer")
        checked: list[tuple[np.ndarray, np.ndarray]] = []
        width: int | None = None
        for i, (weight, bias) in enumerate(layers):
            weight = np.asarray(weight, dtype=np.float64)
            bias = np.asarray(bias, dtype=np.float64)
            if weight.ndim != 2 or bias.shape != (weight.shape[1],):
                raise ValueError(
                    f"layer {i}: W{i} must be (in, out) and b{i} (out,); "
                    f"got {weight.shape} and {bias.shape}"
                )
            if width is not None and weight.shape[0] != width:
                raise ValueError(f"layer {i}: W{i} takes {weight.shape[0]} inputs, previous "
                                 f"layer gives {width}")
            if not (np.all(np.isfinite(weight)) and np.all(np.isfinite(bias))):
                raise ValueError(f"layer {i} holds NaN or infinite values")
            width = int(weight.shape[1])
            checked.append((weight, bias))
        self.layers = checked
        self.n_inputs = int(checked[0][0].shape[0])
        self.n_actions = int(checked[-1][0].shape[1])

    def action_values(self, observation: Any) -> np.ndarray:
        """The output logits for ``observation`` (flattened to ``n_inputs`` floats)."""
        x = np.asarray(observation, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.n_inputs:
            raise ValueError(f"the mlp takes {self.n_inputs} inputs; the observation has "
                             f"{x.shape[0]}")
        for weight, bias in self.layers[:-1]:
            x = np.tanh(x @ weight + bias)
        weight, bias = self.layers[-1]
        out: np.ndarray = x @ weight + bias
        return out

    def act(self, observation: Any, legal_actions: Sequence[int] | None = None) -> int:
        """``argmax`` of the logits over the legal actions."""
        return _masked_argmax(self.action_values(observation), legal_actions)


def _npz_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    return target if target.suffix == ".npz" else target.with_name(target.name + ".npz")


def save_q_table(path: str | os.PathLike[str], q: np.ndarray) -> Path:
    """Write a ``q_table`` checkpoint; returns the path written (``.npz`` is appended if missing).

    Raises ``ValueError`` for a malformed table.
    """
    target = _npz_path(path)
    np.savez(target, **q_table_arrays(q))  # type: ignore[arg-type]  # NumPy's stubs: **kwds: bool
    return target


def q_table_arrays(q: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of a ``q_table`` checkpoint of ``q`` (``ValueError`` for a malformed table):
    what :func:`save_q_table` writes, and what a brain puts beside its state in a phase's
    checkpoint."""
    return {"format": np.array("q_table"), "version": np.array(CHECKPOINT_VERSION),
            "q": QTablePolicy(q).q}


def save_mlp(
    path: str | os.PathLike[str], weights: Sequence[tuple[np.ndarray, np.ndarray]]
) -> Path:
    """Write an ``mlp`` checkpoint from ``[(W0, b0), (W1, b1), ...]``; returns the path written.

    Raises ``ValueError`` when the layer shapes do not chain.
    """
    target = _npz_path(path)
    np.savez(target, **mlp_arrays(weights))  # type: ignore[arg-type]  # NumPy's stubs: **kwds: bool
    return target


def mlp_arrays(weights: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays of an ``mlp`` checkpoint of ``[(W0, b0), ...]`` (``ValueError`` when the
    shapes do not chain): what :func:`save_mlp` writes, and what a brain puts beside its state
    in a phase's checkpoint."""
    arrays: dict[str, np.ndarray] = {"format": np.array("mlp"),
                                     "version": np.array(CHECKPOINT_VERSION)}
    for i, (weight, bias) in enumerate(MLPPolicy(weights).layers):
        arrays[f"W{i}"] = weight
        arrays[f"b{i}"] = bias
    return arrays


def load_policy(path: str | os.PathLike[str]) -> QTablePolicy | MLPPolicy:
    """Read a checkpoint written by :func:`save_q_table` or :func:`save_mlp` (or any learner
    following the format above).

    Raises :class:`PolicyFileError` when the file is missing, is not an ``.npz`` archive, needs
    pickle, or has a missing or unknown ``format``, a wrong ``version``, or malformed arrays.
    """
    source = Path(path)
    if not source.is_file():
        raise PolicyFileError(source, "no such file")
    try:
        with np.load(source, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PolicyFileError(source, f"not a readable .npz archive ({exc})") from exc
    if not isinstance(arrays, dict) or "format" not in arrays:
        raise PolicyFileError(source, "no 'format' array (expected 'q_table' or 'mlp')")
    fmt = arrays["format"]
    if fmt.ndim != 0 or fmt.dtype.kind != "U":
        raise PolicyFileError(source, f"'format' must be a 0-d string array; got {fmt!r}")
    version = arrays.get("version")
    if version is not None and (version.ndim != 0 or int(version) != CHECKPOINT_VERSION):
        raise PolicyFileError(source, f"unsupported checkpoint version {version!r}")
    kind = str(fmt)
    try:
        if kind == "q_table":
            if "q" not in arrays:
                raise ValueError("a q_table checkpoint needs an array 'q'")
            return QTablePolicy(arrays["q"])
        if kind == "mlp":
            layers = []
            i = 0
            while f"W{i}" in arrays:
                if f"b{i}" not in arrays:
                    raise ValueError(f"W{i} has no matching b{i}")
                layers.append((arrays[f"W{i}"], arrays[f"b{i}"]))
                i += 1
            return MLPPolicy(layers)
    except ValueError as exc:
        raise PolicyFileError(source, str(exc)) from exc
    raise PolicyFileError(source, f"unknown format {kind!r} (expected 'q_table' or 'mlp')")
