"""What a tracking sink is: the interface the tee's thread calls, and what it hands over.

A sink logs runs somewhere else than the store (TensorBoard's event files, an MLflow tracking
server). It is only ever called from the one tracking thread (:mod:`mosaic.tracking.dispatch`),
never from a run's, so it needs no lock; what it is given is its own (copies made by the tee).
Every method may raise: the thread then turns the sink off, with one warning, and the runs go
on.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.core.run_states import RunStatus

__all__ = ["Point", "RunEnd", "RunStart", "Sink", "tag"]

#: One scalar of a run: its tag, its value, the run's env steps it is plotted against, and the
#: time it was recorded (seconds since the epoch).
Point = tuple[str, float, int, float]

_NOT_IN_TAG = re.compile(r"[^-/\w.]")


def tag(*parts: str) -> str:
    """A scalar's tag: ``parts`` joined by ``/``, each character other than letters, digits,
    ``_``, ``-``, ``.`` and ``/`` as ``_`` (TensorBoard's rule, which MLflow's keys satisfy: a
    muscle's source ``ppo@cartpole`` is ``ppo_cartpole``)."""
    return _NOT_IN_TAG.sub("_", "/".join(parts))


@dataclass(frozen=True)
class RunStart:
    """A run that starts, or continues in its own row (``resumed``: ``--resume``, or another
    attempt after a crash), from ``steps`` env steps on."""

    uid: str
    experiment: str
    seed: int | None = None
    #: The sweep's values the run was given, by key path.
    params: Mapping[str, Any] = field(default_factory=dict)
    steps: int = 0
    resumed: bool = False


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: ``status`` is one of :data:`~mosaic.core.run_states.FINAL_STATUSES`."""

    uid: str
    status: RunStatus
    error: str | None
    digest: str | None
    episodes: int
    steps: int


class Sink(ABC):
    """Where the tee's thread logs runs to; ``name`` is the sink's, for messages."""

    name: ClassVar[str]

    @abstractmethod
    def start(self, run: RunStart) -> None:
        """Begin logging ``run`` (or go on with it, for a run resumed or attempted again)."""

    @abstractmethod
    def scalars(self, run: str, points: Sequence[Point]) -> None:
        """Log ``points`` of the run ``run`` (its uid)."""

    @abstractmethod
    def finish(self, run: RunEnd) -> None:
        """The run ended: write what is left of it, and close it with its status."""

    def tick(self, now: float) -> None:  # noqa: B027 - optional: most sinks write as they go
        """Called about every second (``now``: ``time.monotonic()``): write what is due."""

    @abstractmethod
    def close(self) -> None:
        """Write everything and let go of every run; a run not finished ends as killed."""
