"""Temporally correlated exploration noise for the continuous-action learners (TD3's
``noise: ornstein-uhlenbeck``): :class:`OrnsteinUhlenbeck`.

Gaussian noise drawn afresh each step averages out over a few steps, so it rarely carries an
agent far from where its actor leads (MountainCarContinuous: rocking the car up the hill needs
one push kept up for dozens of steps). An Ornstein-Uhlenbeck process drifts instead, and reverts
to zero only slowly.
"""

from __future__ import annotations

import numpy as np

from mosaic.core.errors import MosaicError

__all__ = ["Index", "OrnsteinUhlenbeck"]

#: Which of the processes: a NumPy index into :attr:`OrnsteinUhlenbeck.values`.
Index = int | slice | np.ndarray | tuple[int | slice | np.ndarray, ...]


class OrnsteinUhlenbeck:
    """Independent Ornstein-Uhlenbeck processes of mean 0, one per value of an array of
    ``shape`` (for a muscle: slots, copies, action values), each starting at 0.

    A step moves each value it advances by ``-theta * x * dt + sigma * sqrt(dt) * N(0, 1)``
    (the Euler-Maruyama step, as Stable-Baselines3's ``OrnsteinUhlenbeckActionNoise``); left
    alone it settles around 0 with standard deviation ``sigma / sqrt(2 * theta)`` and forgets
    where it was after about ``1 / (theta * dt)`` steps. The draws come from the generator
    given to :meth:`step`, one standard normal per value stepped, so the same generator gives
    the same noise.
    """

    def __init__(self, shape: tuple[int, ...], sigma: float, theta: float, dt: float) -> None:
        if sigma < 0 or theta <= 0 or dt <= 0 or theta * dt > 1:
            raise MosaicError(f"an Ornstein-Uhlenbeck process needs sigma >= 0, theta > 0, "
                              f"dt > 0 and theta * dt <= 1; got sigma {sigma}, theta {theta}, "
                              f"dt {dt}")
        self.values = np.zeros(shape)
        self._keep = 1.0 - theta * dt
        self._scale = sigma * np.sqrt(dt)

    def step(self, rng: np.random.Generator, index: Index = ()) -> np.ndarray:
        """Advance the processes at ``values[index]`` (all of them by default) one step and
        return their new values (a copy)."""
        current = self.values[index]
        moved = current * self._keep + self._scale * rng.standard_normal(current.shape)
        self.values[index] = moved
        result: np.ndarray = np.array(moved, copy=True)
        return result

    def restart(self, index: Index = ()) -> None:
        """Put the processes at ``values[index]`` (all of them by default) back to 0."""
        self.values[index] = 0.0

    def load(self, values: np.ndarray, what: str) -> None:
        """Continue from ``values`` (as :attr:`values` was saved); ``MosaicError`` naming
        ``what`` if their shape is not :attr:`values`'."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != self.values.shape:
            raise MosaicError(f"{what} of shape {values.shape}; expected {self.values.shape}")
        self.values[...] = values
